-- Deploy jobfence:parse_interval to pg
-- requires: jobs
BEGIN;
-- The interval twin of jobs.parse_timestamptz: insert_jobs validates every spec in one
-- set-based pass and needs "not an interval" (a unique_for of "soon") as a value, not as
-- an exception out of the middle of a batch. STRICT: most specs have no unique_for.
CREATE OR REPLACE FUNCTION jobs.parse_interval(value text)
RETURNS interval
LANGUAGE plpgsql STABLE STRICT SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
BEGIN
    RETURN value::interval;
EXCEPTION WHEN data_exception THEN
    RETURN NULL;
END $$;
COMMENT ON FUNCTION jobs.parse_interval(text) IS
    'Internal: value as an interval, or NULL when it is not one. Not granted to any role.';
REVOKE ALL ON FUNCTION jobs.parse_interval(text) FROM PUBLIC;
COMMIT;
