-- Revert jobfence:children from pg
BEGIN;
DROP FUNCTION jobs.children(bigint);
COMMIT;
