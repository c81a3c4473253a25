-- Revert jobfence:poll_submitted from pg
BEGIN;
DROP FUNCTION jobs.poll_submitted(integer);
COMMIT;
