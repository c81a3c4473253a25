-- Deploy jobfence:schedules to pg
-- requires: schedule_table
BEGIN;
CREATE OR REPLACE FUNCTION jobs.schedules()
RETURNS SETOF jobs.schedule
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
    SELECT s.* FROM jobs.schedule AS s ORDER BY s.name;
$$;
COMMENT ON FUNCTION jobs.schedules() IS
    'Every periodic job by name: its definition, the last tick enqueued (last_tick, last_job_id), ticked_through and the next tick as the ticker computed it.';
REVOKE ALL ON FUNCTION jobs.schedules() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jobs.schedules() TO jobs_producer, jobs_admin;
COMMIT;
