-- Revert jobfence:stale_queued from pg
BEGIN;
DROP FUNCTION jobs.stale_queued(text, interval, integer);
COMMIT;
