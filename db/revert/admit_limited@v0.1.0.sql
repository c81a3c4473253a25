-- Revert jobfence:admit_limited from pg
BEGIN;
DROP FUNCTION jobs.admit_limited(bigint[], text[], text[], boolean);
COMMIT;
