-- Revert jobfence:skip_ticks from pg
BEGIN;
DROP FUNCTION jobs.skip_ticks(text, timestamptz, timestamptz);
COMMIT;
