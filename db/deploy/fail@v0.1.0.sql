-- Deploy jobfence:fail to pg
-- requires: fail_with_token
-- requires: outcome
-- requires: raise_lease_lost
-- requires: finish_leases
-- requires: check_worker
BEGIN;
CREATE OR REPLACE FUNCTION jobs.fail(job_id bigint, worker text, lease_version bigint, error text, retryable boolean DEFAULT true)
RETURNS jobs.outcome
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
    -- The token form with no token: one body for both (docs/security.md).
    RETURN jobs.fail(job_id, worker, lease_version, error, retryable, NULL::uuid);
END $$;
COMMENT ON FUNCTION jobs.fail(bigint, text, bigint, text, boolean) IS
    'Record a failed attempt if worker still holds lease_version: back to queued after an exponential backoff while the retry budget lasts, else failed (also when not retryable or cancel was requested). JB001/JB002 as complete; 22023 for an error over 64 KiB.';
REVOKE ALL ON FUNCTION jobs.fail(bigint, text, bigint, text, boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jobs.fail(bigint, text, bigint, text, boolean) TO jobs_worker, jobs_admin;
COMMIT;
