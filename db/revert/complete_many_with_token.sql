-- Revert jobfence:complete_many_with_token from pg
BEGIN;
DROP FUNCTION jobs.complete_many(bigint[], text, bigint[], jsonb[], uuid[]);
COMMIT;
