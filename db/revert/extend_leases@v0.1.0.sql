-- Revert jobfence:extend_leases from pg
BEGIN;
DROP FUNCTION jobs.extend_leases(bigint[], text, bigint[], uuid[]);
COMMIT;
