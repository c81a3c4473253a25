-- Revert jobfence:metrics from pg
BEGIN;
DROP FUNCTION jobs.metrics(interval);
COMMIT;
