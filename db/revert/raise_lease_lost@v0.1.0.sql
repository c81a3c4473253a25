-- Revert jobfence:raise_lease_lost from pg
BEGIN;
DROP FUNCTION jobs.raise_lease_lost(text, bigint, text, bigint);
COMMIT;
