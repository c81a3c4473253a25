-- Revert jobfence:insert_jobs from pg
BEGIN;
DROP FUNCTION jobs.insert_jobs(text, jsonb, bigint, boolean);
COMMIT;
