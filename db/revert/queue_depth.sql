-- Revert jobfence:queue_depth from pg
BEGIN;
DROP VIEW jobs.queue_depth;
COMMIT;
