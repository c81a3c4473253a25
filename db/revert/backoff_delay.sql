-- Revert jobfence:backoff_delay from pg
BEGIN;
DROP FUNCTION jobs.backoff_delay(integer, interval, interval);
COMMIT;
