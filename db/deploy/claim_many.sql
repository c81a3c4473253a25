-- Deploy jobfence:claim_many to pg
-- requires: grant_leases
-- requires: check_worker
BEGIN;
CREATE OR REPLACE FUNCTION jobs.claim_many(job_ids bigint[], worker text, queues text[] DEFAULT NULL)
RETURNS SETOF jobs.lease
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
    PERFORM jobs.check_worker('jobs.claim_many', worker);
    IF job_ids IS NULL THEN
        RAISE EXCEPTION 'jobs.claim_many: job_ids must be an array, not NULL'
            USING ERRCODE = '22023', HINT = 'Pass the ids popped from Redis, e.g. ARRAY[1, 2, 3].';
    END IF;
    RETURN QUERY SELECT * FROM jobs.grant_leases(job_ids, worker, queues => queues);
END $$;
COMMENT ON FUNCTION jobs.claim_many(bigint[], text, text[]) IS
    'Claim those of the given jobs that are claimable now, in one round trip. Returns one lease per claimed job (ordered by id); the others are skipped silently.';
REVOKE ALL ON FUNCTION jobs.claim_many(bigint[], text, text[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jobs.claim_many(bigint[], text, text[]) TO jobs_worker, jobs_admin;
COMMIT;
