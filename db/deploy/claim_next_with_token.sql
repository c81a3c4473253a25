-- Deploy jobfence:claim_next_with_token to pg
-- requires: claim_next
-- requires: lease_grant
-- requires: with_lease_tokens
-- requires: check_worker
BEGIN;
CREATE OR REPLACE FUNCTION jobs.claim_next_with_token(worker text, queues text[] DEFAULT NULL, max_jobs integer DEFAULT 1)
RETURNS SETOF jobs.lease_grant
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
    -- The claim itself is jobs.claim_next's, unchanged: its checks, its choice, its errors.
    RETURN QUERY SELECT * FROM jobs.with_lease_tokens(ARRAY(SELECT l FROM jobs.claim_next(worker, queues, max_jobs) AS l));
END $$;
COMMENT ON FUNCTION jobs.claim_next_with_token(text, text[], integer) IS
    'jobs.claim_next returning jobs.lease_grant: up to max_jobs leases with their lease tokens, oldest due first.';
REVOKE ALL ON FUNCTION jobs.claim_next_with_token(text, text[], integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jobs.claim_next_with_token(text, text[], integer) TO jobs_worker, jobs_admin;
COMMIT;
