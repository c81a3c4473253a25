-- Revert jobfence:paused_queues from pg
BEGIN;
DROP FUNCTION jobs.paused_queues();
COMMIT;
