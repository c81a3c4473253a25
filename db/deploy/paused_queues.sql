-- Deploy jobfence:paused_queues to pg
-- requires: queue_pause
BEGIN;
CREATE OR REPLACE FUNCTION jobs.paused_queues()
RETURNS TABLE (queue text, paused_at timestamptz, paused_by text)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
BEGIN
    RETURN QUERY SELECT p.queue, p.paused_at, p.paused_by::text FROM jobs.queue_pause AS p ORDER BY p.queue;
END $$;
COMMENT ON FUNCTION jobs.paused_queues() IS
    'The queues paused now (jobs.pause), with when and by which login role, sorted by name. Granted to jobs_worker and jobs_admin.';
REVOKE ALL ON FUNCTION jobs.paused_queues() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jobs.paused_queues() TO jobs_worker, jobs_admin;
COMMIT;
