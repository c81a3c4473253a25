-- Deploy jobfence:fail to pg
-- requires: fail_with_token
-- requires: verdict
BEGIN;
-- One token convention (docs/design.md, "Lease tokens"): a write to a held lease takes
-- the token as its last parameter, DEFAULT NULL. The released token-less overload goes
-- in the same transaction as the default arrives, so a call without a token always
-- resolves, by position or by name, to this one body.
DROP FUNCTION jobs.fail(bigint, text, bigint, text, boolean);
CREATE OR REPLACE FUNCTION jobs.fail(job_id bigint, worker text, lease_version bigint, error text, retryable boolean DEFAULT true, token uuid DEFAULT NULL)
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
                             CASE WHEN retryable THEN 'retry' ELSE 'fatal' END::jobs.verdict, NULL, error, token);
END $$;
COMMENT ON FUNCTION jobs.fail(bigint, text, bigint, text, boolean, uuid) IS
    'Record a failed attempt if worker still holds lease_version: back to queued after an exponential backoff while the retry budget lasts, else failed (also when not retryable or cancel was requested). JB001/JB002 as complete; 22023 for an error over 64 KiB. token: the lease token from claim_*_with_token (NULL: none; required when jobs.configure_leases requires it): JB001 (nothing written) also when it is not the lease''s.';
REVOKE ALL ON FUNCTION jobs.fail(bigint, text, bigint, text, boolean, uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jobs.fail(bigint, text, bigint, text, boolean, uuid) TO jobs_worker, jobs_admin;
COMMIT;
