-- Revert jobfence:job_concurrency_key from pg
BEGIN;
DROP INDEX jobs.job_queued_by_key_idx;
ALTER TABLE jobs.job DROP COLUMN concurrency_key;
COMMIT;
