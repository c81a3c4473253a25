-- Revert jobfence:keyed_queues from pg
BEGIN;
DROP FUNCTION jobs.keyed_queues(text[]);
COMMIT;
