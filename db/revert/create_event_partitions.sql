-- Revert jobfence:create_event_partitions from pg
BEGIN;
-- The partitions it created stay: they hold history, and go with jobs.event.
DROP FUNCTION jobs.create_event_partitions(interval);
COMMIT;
