-- Revert jobfence:schedule from pg
BEGIN;
DROP FUNCTION jobs.schedule(text, text, text, jsonb, text, text, boolean);
COMMIT;
