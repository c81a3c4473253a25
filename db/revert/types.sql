-- Revert jobfence:types from pg
BEGIN;
DROP FUNCTION jobs.types();
COMMIT;
