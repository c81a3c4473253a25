-- Revert jobfence:key_owner from pg
BEGIN;
DROP FUNCTION jobs.key_owner();
COMMIT;
