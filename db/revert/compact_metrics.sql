-- Revert jobfence:compact_metrics from pg
BEGIN;
DROP FUNCTION jobs.compact_metrics(integer);
COMMIT;
