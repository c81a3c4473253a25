-- Deploy jobfence:claim_many_with_token to pg
-- requires: grant_leases
-- requires: lease_grant
-- requires: lease_tokens
-- requires: check_worker
BEGIN;
CREATE OR REPLACE FUNCTION jobs.claim_many_with_token(job_ids bigint[], worker text)
RETURNS SETOF jobs.lease_grant
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
    PERFORM jobs.check_worker('jobs.claim_many_with_token', worker);
    IF job_ids IS NULL THEN
        RAISE EXCEPTION 'jobs.claim_many_with_token: job_ids must be an array, not NULL'
            USING ERRCODE = '22023', HINT = 'Pass the ids popped from Redis, e.g. ARRAY[1, 2, 3].';
    END IF;
    -- The one door into processing, as for jobs.claim_many (it records the session role).
    RETURN QUERY
    WITH granted AS (
        SELECT l.*, row_number() OVER () AS n FROM jobs.grant_leases(job_ids, worker) AS l
    ), tokens AS (
        -- The token of each lease, computed for the whole batch in one call.
        SELECT jobs.lease_tokens(array_agg(g.job_id ORDER BY g.n), array_agg(g.lease_version ORDER BY g.n)) AS t
          FROM granted AS g
    )
    SELECT g.job_id, g.lease_version, g.kind, g.queue, g.payload, g.attempt, g.lease_expires_at, g.timeout_at, k.t[g.n]
      FROM granted AS g, tokens AS k
     ORDER BY g.n;
END $$;
COMMENT ON FUNCTION jobs.claim_many_with_token(bigint[], text) IS
    'jobs.claim_many returning jobs.lease_grant: one lease with its lease token per claimed job (ordered by id); the others are skipped silently.';
REVOKE ALL ON FUNCTION jobs.claim_many_with_token(bigint[], text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jobs.claim_many_with_token(bigint[], text) TO jobs_worker, jobs_admin;
COMMIT;
