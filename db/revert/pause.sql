-- Revert jobfence:pause from pg
BEGIN;
DROP FUNCTION jobs.pause(text);
COMMIT;
