-- Revert jobfence:heartbeat_many from pg
BEGIN;
DROP FUNCTION jobs.heartbeat_many(bigint[], text, bigint[]);
COMMIT;
