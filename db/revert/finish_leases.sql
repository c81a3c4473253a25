-- Revert jobfence:finish_leases from pg: the jobs.verdict[] form goes; the released
-- text[] form, which the expand left in place, serves again.
BEGIN;
DROP FUNCTION jobs.finish_leases(bigint[], text[], bigint[], jobs.verdict[], jsonb[], text[], uuid[], text, interval[]);
COMMIT;
