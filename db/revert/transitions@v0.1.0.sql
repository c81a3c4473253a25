-- Revert jobfence:transitions from pg
BEGIN;
DROP FUNCTION jobs.transitions();
COMMIT;
