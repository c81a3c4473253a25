-- Deploy jobfence:signals to pg
-- requires: job
-- requires: signal
BEGIN;
CREATE OR REPLACE FUNCTION jobs.signals(job_ids bigint[])
RETURNS SETOF jobs.signal
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
AS $$
BEGIN
    -- Drivers push woken, replayed and fanned-out jobs after commit: one lookup for all of
    -- them instead of one jobs.get each. A job still blocked by an older job of its
    -- ordering key is listed too; its claim is a no-op until that job ends and wakes it.
    RETURN QUERY
    SELECT j.id, j.queue, j.run_after, j.priority
      FROM jobs.job AS j
     WHERE j.id = ANY (signals.job_ids)
       AND j.status IS NOT DISTINCT FROM 'queued'  -- primary key, never a partial index: see jobs.claimable
       AND j.pending_children = 0
     ORDER BY j.id;
END $$;
COMMENT ON FUNCTION jobs.signals(bigint[]) IS
    'Where to push those of the given jobs that wait for a signal (queued, no pending children): (job_id, queue, run_after, priority), by id. Unknown and other ids are left out.';
REVOKE ALL ON FUNCTION jobs.signals(bigint[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jobs.signals(bigint[]) TO jobs_producer, jobs_worker, jobs_admin;
COMMIT;
