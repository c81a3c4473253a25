-- Revert jobfence:finish_leases from pg
BEGIN;
DROP FUNCTION jobs.finish_leases(bigint[], text[], bigint[], text[], jsonb[], text[], uuid[], text, interval[]);
COMMIT;
