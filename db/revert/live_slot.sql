-- Revert jobfence:live_slot from pg
BEGIN;
DROP VIEW jobs.live_slot;
COMMIT;
