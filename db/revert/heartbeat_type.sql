-- Revert jobfence:heartbeat_type from pg
BEGIN;
DROP TYPE jobs.heartbeat;
COMMIT;
