-- Revert jobfence:dead_letters from pg
BEGIN;
DROP FUNCTION jobs.dead_letters(bigint[]);
COMMIT;
