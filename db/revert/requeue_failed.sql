-- Revert jobfence:requeue_failed from pg
BEGIN;
DROP FUNCTION jobs.requeue_failed(bigint[]);
COMMIT;
