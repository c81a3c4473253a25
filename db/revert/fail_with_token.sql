-- Revert jobfence:fail_with_token from pg
BEGIN;
DROP FUNCTION jobs.fail(bigint, text, bigint, text, boolean, uuid);
COMMIT;
