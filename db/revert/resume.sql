-- Revert jobfence:resume from pg
BEGIN;
DROP FUNCTION jobs.resume(text);
COMMIT;
