-- Deploy jobfence:queues to pg
-- requires: job
-- requires: job_type
BEGIN;
CREATE OR REPLACE FUNCTION jobs.queues()
RETURNS TABLE (queue text)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
#variable_conflict use_column
BEGIN
    -- The queues a reaper or relay must sweep come from here, never from Redis (which may
    -- have been flushed): every declared kind's queue, and every queue that still holds
    -- queued jobs (a kind may have moved to another queue since they were submitted). The
    -- second half skips from one distinct queue to the next on the queued-jobs index, so
    -- a large backlog costs one index probe per queue.
    RETURN QUERY
    WITH RECURSIVE backlog AS (
        (SELECT j.queue FROM jobs.job AS j WHERE j.status = 'queued' ORDER BY j.queue LIMIT 1)
        UNION ALL
        SELECT (SELECT j.queue FROM jobs.job AS j
                 WHERE j.status = 'queued' AND j.queue > b.queue
                 ORDER BY j.queue LIMIT 1)
          FROM backlog AS b
         WHERE b.queue IS NOT NULL
    )
    SELECT q.queue FROM (SELECT t.queue FROM jobs.job_type AS t
                         UNION
                         SELECT b.queue FROM backlog AS b WHERE b.queue IS NOT NULL) AS q
     ORDER BY q.queue;
END $$;
COMMENT ON FUNCTION jobs.queues() IS
    'Every queue in use: those of the declared kinds and those holding queued jobs, sorted. What reapers and relays sweep.';
REVOKE ALL ON FUNCTION jobs.queues() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jobs.queues() TO jobs_producer, jobs_worker, jobs_admin;
COMMIT;
