-- Revert jobfence:enqueue_tick from pg
BEGIN;
DROP FUNCTION jobs.enqueue_tick(text, timestamptz, timestamptz);
COMMIT;
