-- Revert jobfence:metric_minute from pg
BEGIN;
DROP TABLE jobs.metric_minute;
COMMIT;
