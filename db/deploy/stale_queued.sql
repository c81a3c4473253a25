-- Deploy jobfence:stale_queued to pg
-- requires: claimable
-- requires: signal
-- requires: queue_pause
BEGIN;
CREATE OR REPLACE FUNCTION jobs.stale_queued(queue text, older_than interval DEFAULT '5 seconds', max_jobs integer DEFAULT 1000)
RETURNS SETOF jobs.signal
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
BEGIN
    IF queue IS NULL THEN
        RAISE EXCEPTION 'jobs.stale_queued: queue must not be NULL'
            USING ERRCODE = '22023', HINT = 'Call it once per queue whose Redis ready list is empty.';
    END IF;
    IF older_than IS NULL OR older_than < interval '0' OR older_than > interval '100 years' THEN
        RAISE EXCEPTION 'jobs.stale_queued: older_than must be a non-negative interval of at most 100 years'
            USING ERRCODE = '22023', HINT = 'E.g. ''5 seconds'': skip jobs whose signal may still be in flight.';
    END IF;
    IF max_jobs IS NULL OR max_jobs < 1 THEN
        RAISE EXCEPTION 'jobs.stale_queued: max_jobs must be at least 1, got %', coalesce(max_jobs::text, 'NULL')
            USING ERRCODE = '22023', HINT = 'The reaper pushes at most this many ids per sweep.';
    END IF;
    -- A paused queue's jobs are not claimable: signalling them would only feed the workers
    -- ids to drop. jobs.resume's caller signals them instead.
    IF EXISTS (SELECT 1 FROM jobs.queue_pause AS p WHERE p.queue = stale_queued.queue) THEN
        RETURN;
    END IF;
    -- Read-only: lost signals cost latency, never jobs. Pushing a job twice is harmless.
    -- MATERIALIZED keeps the planner on the queue's partial index (due jobs only): with a
    -- bare ORDER BY id LIMIT it may walk the primary key through every terminal row instead.
    RETURN QUERY
    WITH due AS MATERIALIZED (
        SELECT c.id, c.queue, c.run_after, c.priority
          FROM jobs.claimable AS c
         -- status = 'queued' repeats the view's rule so the queue's partial index serves the scan.
         WHERE c.status = 'queued'
           AND c.queue = stale_queued.queue
           AND c.updated_at <= now() - older_than
           -- A delayed job's signal is in the delayed set until it is due, then moved to the
           -- ready list by the next sweep: it is stale only once it has been due that long too.
           AND c.run_after <= now() - older_than
    )
    -- Id order, whatever the priority: `jobfence audit` merges this list with the Redis lists
    -- by id. Each id goes to its priority's band, so the workers still take the urgent first.
    SELECT d.id, d.queue, d.run_after, d.priority FROM due AS d ORDER BY d.id LIMIT max_jobs;
END $$;
COMMENT ON FUNCTION jobs.stale_queued(text, interval, integer) IS
    'Claimable jobs of a queue untouched and due for at least older_than, oldest id first, each with its priority (its Redis band): what the reaper re-pushes when the Redis ready lists are empty. None for a paused queue.';
REVOKE ALL ON FUNCTION jobs.stale_queued(text, interval, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jobs.stale_queued(text, interval, integer) TO jobs_admin;
COMMIT;
