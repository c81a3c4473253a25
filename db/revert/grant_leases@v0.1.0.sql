-- Revert jobfence:grant_leases from pg
BEGIN;
DROP FUNCTION jobs.grant_leases(bigint[], text, boolean, text[]);
COMMIT;
