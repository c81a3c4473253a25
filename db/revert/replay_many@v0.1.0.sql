-- Revert jobfence:replay_many from pg
BEGIN;
DROP FUNCTION jobs.replay_many(text, text, timestamptz, integer);
COMMIT;
