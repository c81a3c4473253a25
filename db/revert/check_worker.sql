-- Revert jobfence:check_worker from pg
BEGIN;
DROP FUNCTION jobs.check_worker(text, text);
COMMIT;
