-- Revert jobfence:list_jobs from pg
BEGIN;
DROP FUNCTION jobs.list_jobs(text, jobs.status, bigint, integer, text, text);
COMMIT;
