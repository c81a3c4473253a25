-- Revert jobfence:fail_many_with_token from pg
BEGIN;
DROP FUNCTION jobs.fail_many(bigint[], text, bigint[], text[], boolean[], uuid[]);
COMMIT;
