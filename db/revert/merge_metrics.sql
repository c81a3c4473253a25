-- Revert jobfence:merge_metrics from pg
BEGIN;
DROP FUNCTION jobs.merge_metrics(jobs.metric_minute[]);
COMMIT;
