-- Revert jobfence:own_jobs_only from pg
BEGIN;
DROP FUNCTION jobs.own_jobs_only(boolean);
COMMIT;
