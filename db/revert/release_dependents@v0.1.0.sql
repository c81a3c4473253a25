-- Revert jobfence:release_dependents from pg
BEGIN;
DROP FUNCTION jobs.release_dependents(bigint[]);
COMMIT;
