-- Revert jobfence:heartbeat_many_with_token from pg
BEGIN;
DROP FUNCTION jobs.heartbeat_many(bigint[], text, bigint[], uuid[]);
COMMIT;
