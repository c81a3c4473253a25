-- Revert jobfence:audit from pg
BEGIN;
DROP FUNCTION jobs.audit(interval, integer);
COMMIT;
