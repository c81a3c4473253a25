-- Revert jobfence:lease from pg
BEGIN;
DROP TYPE jobs.lease;
COMMIT;
