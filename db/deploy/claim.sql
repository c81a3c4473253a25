-- Deploy jobfence:claim to pg
-- requires: grant_leases
-- requires: check_worker
BEGIN;
CREATE OR REPLACE FUNCTION jobs.claim(job_id bigint, worker text, queues text[] DEFAULT NULL)
RETURNS SETOF jobs.lease
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
    PERFORM jobs.check_worker('jobs.claim', worker);
    -- Zero rows when the job is not claimable now (already claimed, not due, blocked, unknown):
    -- a duplicate Redis signal is harmless. The grant waits out a concurrent claimer and then
    -- re-checks the row, so exactly one of N racing claims wins.
    RETURN QUERY SELECT * FROM jobs.grant_leases(ARRAY[job_id], worker, queues => queues);
END $$;
COMMENT ON FUNCTION jobs.claim(bigint, text, text[]) IS
    'Claim one job if it is claimable now (queued -> processing, lease_version + 1). Returns the lease, or zero rows.';
REVOKE ALL ON FUNCTION jobs.claim(bigint, text, text[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jobs.claim(bigint, text, text[]) TO jobs_worker, jobs_admin;
COMMIT;
