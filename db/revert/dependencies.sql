-- Revert jobfence:dependencies from pg
BEGIN;
DROP FUNCTION jobs.dependencies(bigint);
COMMIT;
