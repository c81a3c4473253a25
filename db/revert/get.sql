-- Revert jobfence:get from pg
BEGIN;
DROP FUNCTION jobs.get(bigint);
COMMIT;
