-- Revert jobfence:configure_producers from pg
BEGIN;
DROP FUNCTION jobs.configure_producers(boolean);
COMMIT;
