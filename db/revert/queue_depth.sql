-- Revert jobfence:queue_depth from pg
BEGIN;
DROP VIEW jobs.queue_depth;
DROP FUNCTION jobs.queue_depth_counts();
COMMIT;
