-- Revert jobfence:claim_many_with_token from pg: back to the body released in v0.1.0
BEGIN;
CREATE OR REPLACE FUNCTION jobs.claim_many_with_token(job_ids bigint[], worker text, queues text[] DEFAULT NULL)
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
    RETURN QUERY SELECT * FROM jobs.with_lease_tokens(ARRAY(SELECT l FROM jobs.grant_leases(job_ids, worker, queues => queues) AS l));
END $$;
COMMENT ON FUNCTION jobs.claim_many_with_token(bigint[], text, text[]) IS
    'jobs.claim_many returning jobs.lease_grant: one lease with its lease token per claimed job (ordered by id); the others are skipped silently.';
REVOKE ALL ON FUNCTION jobs.claim_many_with_token(bigint[], text, text[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jobs.claim_many_with_token(bigint[], text, text[]) TO jobs_worker, jobs_admin;
COMMIT;
