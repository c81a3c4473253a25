-- Deploy jobfence:fail_with_token to pg
-- requires: outcome
-- requires: finish_lease
-- requires: check_worker
BEGIN;
-- jobs.fail with the lease token the claim returned.
CREATE OR REPLACE FUNCTION jobs.fail(job_id bigint, worker text, lease_version bigint, error text, retryable boolean, token uuid)
RETURNS jobs.outcome
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
    PERFORM jobs.check_worker('jobs.fail', worker);
    IF error IS NULL OR btrim(error) = '' THEN
        RAISE EXCEPTION 'jobs.fail: error must be a non-empty description of the failure'
            USING ERRCODE = '22023', HINT = 'Pass the exception text, e.g. ''timeout'' or ''HTTP 503 from billing''.';
    END IF;
    IF retryable IS NULL THEN
        RAISE EXCEPTION 'jobs.fail: retryable must be true or false, not NULL'
            USING ERRCODE = '22023', HINT = 'Use false for permanent errors that no retry can fix.';
    END IF;
    RETURN jobs.finish_lease('jobs.fail', job_id, worker, lease_version,
                             CASE WHEN retryable THEN 'retry' ELSE 'fatal' END, NULL, error, token);
END $$;
COMMENT ON FUNCTION jobs.fail(bigint, text, bigint, text, boolean, uuid) IS
    'jobs.fail presenting the lease token from claim_*_with_token: JB001 (nothing written) also when token is not the lease''s. 22023 for an error over 64 KiB.';
REVOKE ALL ON FUNCTION jobs.fail(bigint, text, bigint, text, boolean, uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jobs.fail(bigint, text, bigint, text, boolean, uuid) TO jobs_worker, jobs_admin;
COMMIT;
