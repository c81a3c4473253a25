-- Revert jobfence:mark_enqueue_failed from pg
BEGIN;
DROP FUNCTION jobs.mark_enqueue_failed(bigint[]);
COMMIT;
