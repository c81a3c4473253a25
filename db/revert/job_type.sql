-- Revert jobfence:job_type from pg
BEGIN;
DROP TABLE jobs.job_type;
COMMIT;
