-- Revert jobfence:prune from pg
BEGIN;
DROP FUNCTION jobs.prune(interval, integer);
COMMIT;
