-- Deploy jobfence:fail_many to pg
-- requires: fail_many_with_token
-- requires: outcome
-- requires: finish_leases
-- requires: check_worker
BEGIN;
CREATE OR REPLACE FUNCTION jobs.fail_many(job_ids bigint[], worker text, lease_versions bigint[],
                                          errors text[], retryable boolean[])
RETURNS SETOF jobs.outcome
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
    -- The token form with no tokens: one body for both (docs/security.md).
    RETURN QUERY SELECT * FROM jobs.fail_many(job_ids, worker, lease_versions, errors, retryable, NULL::uuid[]);
END $$;
COMMENT ON FUNCTION jobs.fail_many(bigint[], text, bigint[], text[], boolean[]) IS
    'Record many failed attempts in one round trip, each as jobs.fail would. One outcome per item in input order: accepted = false (nothing written) where worker no longer holds that lease_version under the claiming session role. 22023 (nothing written) when an error exceeds 64 KiB.';
REVOKE ALL ON FUNCTION jobs.fail_many(bigint[], text, bigint[], text[], boolean[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jobs.fail_many(bigint[], text, bigint[], text[], boolean[]) TO jobs_worker, jobs_admin;
COMMIT;
