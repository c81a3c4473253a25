-- Revert jobfence:schedules from pg
BEGIN;
DROP FUNCTION jobs.schedules();
COMMIT;
