-- Revert jobfence:events from pg
BEGIN;
DROP FUNCTION jobs.events(bigint);
COMMIT;
