-- Revert jobfence:dependents from pg
BEGIN;
DROP FUNCTION jobs.dependents(bigint);
COMMIT;
