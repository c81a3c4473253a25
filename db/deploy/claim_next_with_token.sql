-- Deploy jobfence:claim_next_with_token to pg
-- requires: claim_next
-- requires: lease_grant
-- requires: lease_tokens
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
    PERFORM jobs.check_worker('jobs.claim_next_with_token', worker);
    IF max_jobs IS NULL OR max_jobs < 1 THEN
        RAISE EXCEPTION 'jobs.claim_next_with_token: max_jobs must be at least 1, got %', coalesce(max_jobs::text, 'NULL')
            USING ERRCODE = '22023', HINT = 'Ask for as many jobs as you have free slots.';
    END IF;
    -- The claim itself is jobs.claim_next's, unchanged (grant_leases records the session role).
    RETURN QUERY
    WITH granted AS (
        SELECT l.*, row_number() OVER () AS n FROM jobs.claim_next(worker, queues, max_jobs) AS l
    ), tokens AS (
        -- The token of each lease, computed for the whole batch in one call.
        SELECT jobs.lease_tokens(array_agg(g.job_id ORDER BY g.n), array_agg(g.lease_version ORDER BY g.n)) AS t
          FROM granted AS g
    )
    SELECT g.job_id, g.lease_version, g.kind, g.queue, g.payload, g.attempt, g.lease_expires_at, g.timeout_at, k.t[g.n]
      FROM granted AS g, tokens AS k
     ORDER BY g.n;
END $$;
COMMENT ON FUNCTION jobs.claim_next_with_token(text, text[], integer) IS
    'jobs.claim_next returning jobs.lease_grant: up to max_jobs leases with their lease tokens, oldest due first.';
REVOKE ALL ON FUNCTION jobs.claim_next_with_token(text, text[], integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jobs.claim_next_with_token(text, text[], integer) TO jobs_worker, jobs_admin;
COMMIT;
