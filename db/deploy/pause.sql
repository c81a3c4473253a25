-- Deploy jobfence:pause to pg
-- requires: queue_pause
-- requires: check_queue
BEGIN;
CREATE OR REPLACE FUNCTION jobs.pause(queue text)
RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
DECLARE
    changed boolean;
BEGIN
    PERFORM jobs.check_queue('jobs.pause', queue);
    -- Claims read jobs.queue_pause in their own statement, so jobs claimed before this
    -- commits keep running; none is claimed after.
    WITH paused AS (
        INSERT INTO jobs.queue_pause AS p (queue) VALUES (pause.queue)
        ON CONFLICT ON CONSTRAINT queue_pause_pkey DO NOTHING
        RETURNING p.queue
    ), logged AS (
        INSERT INTO jobs.queue_pause_log (queue, action)
        SELECT p.queue, 'paused' FROM paused AS p
    )
    SELECT count(*) > 0 INTO changed FROM paused;
    RETURN changed;
END $$;
COMMENT ON FUNCTION jobs.pause(text) IS
    'Pause a queue: its jobs stay queued and no claim (claim, claim_many, claim_next) grants them until jobs.resume; jobs already running go on. True if the queue was running (logged in jobs.queue_pause_log), false if already paused. 22023 for a malformed name. Granted to jobs_admin.';
REVOKE ALL ON FUNCTION jobs.pause(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jobs.pause(text) TO jobs_admin;
COMMIT;
