-- Revert jobfence:held_back from pg
BEGIN;
DROP FUNCTION jobs.held_back(bigint[]);
COMMIT;
