-- Revert jobfence:status from pg
BEGIN;
DROP TYPE jobs.status;
COMMIT;
