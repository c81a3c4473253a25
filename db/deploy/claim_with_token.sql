-- Deploy jobfence:claim_with_token to pg
-- requires: grant_leases
-- requires: lease_grant
-- requires: with_lease_tokens
-- requires: check_worker
BEGIN;
CREATE OR REPLACE FUNCTION jobs.claim_with_token(job_id bigint, worker text, queues text[] DEFAULT NULL)
RETURNS SETOF jobs.lease_grant
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
    PERFORM jobs.check_worker('jobs.claim_with_token', worker);
    -- The one door into processing, as for jobs.claim (it records the session role).
    RETURN QUERY SELECT * FROM jobs.with_lease_tokens(ARRAY(SELECT l FROM jobs.grant_leases(ARRAY[job_id], worker, queues => queues) AS l));
END $$;
COMMENT ON FUNCTION jobs.claim_with_token(bigint, text, text[]) IS
    'jobs.claim returning jobs.lease_grant: the lease and its lease token, or zero rows.';
REVOKE ALL ON FUNCTION jobs.claim_with_token(bigint, text, text[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jobs.claim_with_token(bigint, text, text[]) TO jobs_worker, jobs_admin;
COMMIT;
