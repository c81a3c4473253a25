-- Revert jobfence:unclaimed from pg
BEGIN;
DROP FUNCTION jobs.unclaimed(bigint[], text[]);
COMMIT;
