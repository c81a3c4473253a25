-- Revert jobfence:submit from pg
BEGIN;
DROP FUNCTION jobs.submit(text, jsonb, text, timestamptz, text, boolean, integer);
COMMIT;
