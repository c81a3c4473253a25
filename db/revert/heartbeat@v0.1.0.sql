-- Revert jobfence:heartbeat from pg
BEGIN;
DROP FUNCTION jobs.heartbeat(bigint, text, bigint);
COMMIT;
