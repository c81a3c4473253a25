-- Deploy jobfence:unschedule to pg
-- requires: schedule_table
BEGIN;
-- Jobs a schedule already enqueued stay as they are: they are jobs like any other.
CREATE OR REPLACE FUNCTION jobs.unschedule(name text)
RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
BEGIN
    IF unschedule.name IS NULL THEN
        RAISE EXCEPTION 'jobs.unschedule: name must not be NULL'
            USING ERRCODE = '22023', HINT = 'Pass the name given to jobs.schedule; jobs.schedules() lists them.';
    END IF;
    DELETE FROM jobs.schedule AS s WHERE s.name = unschedule.name;
    RETURN FOUND;
END $$;
COMMENT ON FUNCTION jobs.unschedule(text) IS
    'Delete the periodic job name: true if it existed, false otherwise. Jobs it already enqueued are kept.';
REVOKE ALL ON FUNCTION jobs.unschedule(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jobs.unschedule(text) TO jobs_admin;
COMMIT;
