-- Revert jobfence:drop_event_partitions from pg
BEGIN;
DROP FUNCTION jobs.drop_event_partitions(interval);
COMMIT;
