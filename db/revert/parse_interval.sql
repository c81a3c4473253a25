-- Revert jobfence:parse_interval from pg
BEGIN;
DROP FUNCTION jobs.parse_interval(text);
COMMIT;
