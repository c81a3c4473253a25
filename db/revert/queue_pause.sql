-- Revert jobfence:queue_pause from pg
BEGIN;
DROP TABLE jobs.queue_pause_log;
DROP TABLE jobs.queue_pause;
COMMIT;
