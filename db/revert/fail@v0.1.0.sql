-- Revert jobfence:fail from pg
BEGIN;
DROP FUNCTION jobs.fail(bigint, text, bigint, text, boolean);
COMMIT;
