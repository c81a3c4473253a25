-- Revert jobfence:check_queue from pg
BEGIN;
DROP FUNCTION jobs.check_queue(text, text);
COMMIT;
