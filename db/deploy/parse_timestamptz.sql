-- Deploy jobfence:parse_timestamptz to pg
-- requires: jobs
BEGIN;
-- PostgreSQL 15 has no non-raising input check (pg_input_is_valid came in 16): insert_jobs
-- validates every spec in one set-based pass and needs "not a timestamp" as a value.
-- STRICT: most specs have no run_after, and the validation's `typeof = 'string' AND ...`
-- is NULL AND ... for them, which still evaluates its right side: a strict function is
-- not even entered for a NULL.
CREATE OR REPLACE FUNCTION jobs.parse_timestamptz(value text)
RETURNS timestamptz
LANGUAGE plpgsql STABLE STRICT SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
BEGIN
    RETURN value::timestamptz;
-- The whole class 22: besides bad formats and out-of-range fields, an offset beyond +-15:59
-- raises 22009 and an unknown zone 22023; each is "not a timestamp" to the caller.
EXCEPTION WHEN data_exception THEN
    RETURN NULL;
END $$;
COMMENT ON FUNCTION jobs.parse_timestamptz(text) IS
    'Internal: value as a timestamptz, or NULL when it is not one. Not granted to any role.';
REVOKE ALL ON FUNCTION jobs.parse_timestamptz(text) FROM PUBLIC;
COMMIT;
