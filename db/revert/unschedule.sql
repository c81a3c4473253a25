-- Revert jobfence:unschedule from pg
BEGIN;
DROP FUNCTION jobs.unschedule(text);
COMMIT;
