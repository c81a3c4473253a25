-- Revert jobfence:snooze_many from pg
BEGIN;
DROP FUNCTION jobs.snooze_many(bigint[], text, bigint[], interval[], uuid[]);
COMMIT;
