-- Revert jobfence:fail_many from pg
BEGIN;
DROP FUNCTION jobs.fail_many(bigint[], text, bigint[], text[], boolean[]);
COMMIT;
