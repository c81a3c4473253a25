-- Revert jobfence:reap from pg
BEGIN;
DROP FUNCTION jobs.reap(integer);
COMMIT;
