-- Deploy jobfence:complete_many to pg
-- requires: complete_many_with_token
-- requires: outcome
-- requires: finish_leases
-- requires: check_worker
BEGIN;
CREATE OR REPLACE FUNCTION jobs.complete_many(job_ids bigint[], worker text, lease_versions bigint[], results jsonb[])
RETURNS SETOF jobs.outcome
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
    -- The token form with no tokens: one body for both (docs/security.md).
    RETURN QUERY SELECT * FROM jobs.complete_many(job_ids, worker, lease_versions, results, NULL::uuid[]);
END $$;
COMMENT ON FUNCTION jobs.complete_many(bigint[], text, bigint[], jsonb[]) IS
    'Complete many jobs in one round trip. One outcome per item in input order: accepted = false (nothing written) where worker no longer holds that lease_version under the claiming session role. 22023 (nothing written) when a result exceeds 1 MiB, 22003 when one holds a number beyond the IEEE-754 double range.';
REVOKE ALL ON FUNCTION jobs.complete_many(bigint[], text, bigint[], jsonb[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jobs.complete_many(bigint[], text, bigint[], jsonb[]) TO jobs_worker, jobs_admin;
COMMIT;
