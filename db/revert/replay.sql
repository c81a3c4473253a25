-- Revert jobfence:replay from pg
BEGIN;
DROP FUNCTION jobs.replay(bigint);
COMMIT;
