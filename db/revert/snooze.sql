-- Revert jobfence:snooze from pg
BEGIN;
DROP FUNCTION jobs.snooze(bigint, text, bigint, interval, uuid);
COMMIT;
