-- Revert jobfence:job from pg
BEGIN;
DROP TABLE jobs.job;
COMMIT;
