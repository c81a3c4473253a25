-- Revert jobfence:parse_timestamptz from pg
BEGIN;
DROP FUNCTION jobs.parse_timestamptz(text);
COMMIT;
