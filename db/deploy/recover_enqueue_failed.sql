-- Deploy jobfence:recover_enqueue_failed to pg
-- requires: job
-- requires: event
-- requires: signal
BEGIN;
CREATE OR REPLACE FUNCTION jobs.recover_enqueue_failed(max_jobs integer DEFAULT 1000)
RETURNS SETOF jobs.signal
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
BEGIN
    IF max_jobs IS NULL OR max_jobs < 1 THEN
        RAISE EXCEPTION 'jobs.recover_enqueue_failed: max_jobs must be at least 1, got %', coalesce(max_jobs::text, 'NULL')
            USING ERRCODE = '22023', HINT = 'Call again while it returns max_jobs rows.';
    END IF;
    -- SKIP LOCKED: several reapers may recover at once, each job exactly once.
    RETURN QUERY
    WITH picked AS (
        SELECT j.id FROM jobs.job AS j
         WHERE j.status = 'enqueue_failed'
         ORDER BY j.id
         LIMIT max_jobs
         FOR UPDATE SKIP LOCKED
    ), recovered AS (
        UPDATE jobs.job AS j
           SET status = 'queued', updated_at = now()
          FROM picked AS p
         WHERE j.id = p.id AND j.status = 'enqueue_failed'
        RETURNING j.id, j.queue, j.run_after, j.lease_version, j.priority
    ), logged AS (
        INSERT INTO jobs.event (job_id, at, from_status, to_status, lease_version, reason)
        SELECT r.id, now(), 'enqueue_failed', 'queued', r.lease_version, 'recovered' FROM recovered AS r
    )
    SELECT r.id, r.queue, r.run_after, r.priority FROM recovered AS r ORDER BY r.id;
END $$;
COMMENT ON FUNCTION jobs.recover_enqueue_failed(integer) IS
    'Return up to max_jobs enqueue_failed jobs to queued (oldest first) and list them so the caller pushes them again.';
REVOKE ALL ON FUNCTION jobs.recover_enqueue_failed(integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jobs.recover_enqueue_failed(integer) TO jobs_admin;
COMMIT;
