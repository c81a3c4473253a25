-- Revert jobfence:max_snoozes from pg
BEGIN;
DROP FUNCTION jobs.max_snoozes();
COMMIT;
