-- Deploy jobfence:claim_many to pg
-- requires: grant_leases
-- requires: check_worker
BEGIN;
CREATE OR REPLACE FUNCTION jobs.claim_many(job_ids bigint[], worker text)
RETURNS SETOF jobs.lease
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    picked bigint[];
BEGIN
    PERFORM jobs.check_worker('jobs.claim_many', worker);
    IF job_ids IS NULL THEN
        RAISE EXCEPTION 'jobs.claim_many: job_ids must be an array, not NULL'
            USING ERRCODE = '22023', HINT = 'Pass the ids popped from Redis, e.g. ARRAY[1, 2, 3].';
    END IF;
    -- Locks are taken in id order so two workers holding overlapping (duplicated) ids cannot deadlock.
    -- Joined to the (distinct) ids so each is a primary-key lookup: "id = ANY" let the
    -- planner walk the partial index of every due queued job instead.
    picked := ARRAY(SELECT c.id
                      FROM (SELECT DISTINCT u.id FROM unnest(claim_many.job_ids) AS u(id)) AS wanted
                      JOIN jobs.claimable AS c ON c.id = wanted.id
                     ORDER BY c.id
                       FOR UPDATE OF c);
    RETURN QUERY SELECT * FROM jobs.grant_leases(picked, worker);
END $$;
COMMENT ON FUNCTION jobs.claim_many(bigint[], text) IS
    'Claim those of the given jobs that are claimable now, in one round trip. Returns one lease per claimed job (ordered by id); the others are skipped silently.';
REVOKE ALL ON FUNCTION jobs.claim_many(bigint[], text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jobs.claim_many(bigint[], text) TO jobs_worker, jobs_admin;
COMMIT;
