-- Revert jobfence:recover_enqueue_failed from pg
BEGIN;
DROP FUNCTION jobs.recover_enqueue_failed(integer);
COMMIT;
