-- Revert jobfence:queues from pg
BEGIN;
DROP FUNCTION jobs.queues();
COMMIT;
