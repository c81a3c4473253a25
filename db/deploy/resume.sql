-- Deploy jobfence:resume to pg
-- requires: queue_pause
-- requires: check_queue
BEGIN;
CREATE OR REPLACE FUNCTION jobs.resume(queue text)
RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
DECLARE
    changed boolean;
BEGIN
    PERFORM jobs.check_queue('jobs.resume', queue);
    WITH resumed AS (
        DELETE FROM jobs.queue_pause AS p WHERE p.queue = resume.queue RETURNING p.queue
    ), logged AS (
        INSERT INTO jobs.queue_pause_log (queue, action)
        SELECT r.queue, 'resumed' FROM resumed AS r
    )
    SELECT count(*) > 0 INTO changed FROM resumed;
    RETURN changed;
END $$;
COMMENT ON FUNCTION jobs.resume(text) IS
    'Resume a paused queue: its jobs are claimable again. The signals popped while it was paused were dropped, so the caller then pushes jobs.stale_queued(queue, ''0 seconds'') (the drivers do; otherwise the reaper''s next sweep does). True if the queue was paused (logged in jobs.queue_pause_log), false if it was not. 22023 for a malformed name. Granted to jobs_admin.';
REVOKE ALL ON FUNCTION jobs.resume(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jobs.resume(text) TO jobs_admin;
COMMIT;
