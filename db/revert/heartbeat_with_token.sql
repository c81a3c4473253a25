-- Revert jobfence:heartbeat_with_token from pg
BEGIN;
DROP FUNCTION jobs.heartbeat(bigint, text, bigint, uuid);
COMMIT;
