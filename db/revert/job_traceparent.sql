-- Revert jobfence:job_traceparent from pg
BEGIN;
ALTER TABLE jobs.job DROP COLUMN traceparent;
COMMIT;
