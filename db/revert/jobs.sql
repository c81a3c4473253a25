-- Revert jobfence:jobs from pg
BEGIN;
DROP SCHEMA jobs;
COMMIT;
