-- Deploy jobfence:parse_timestamptz to pg
-- requires: jobs
BEGIN;
-- PostgreSQL 15 has no non-raising input check (pg_input_is_valid came in 16): insert_jobs
-- validates every spec in one set-based pass and needs "not a timestamp" as a value.
CREATE OR REPLACE FUNCTION jobs.parse_timestamptz(value text)
RETURNS timestamptz
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
BEGIN
    RETURN value::timestamptz;
EXCEPTION WHEN invalid_datetime_format OR datetime_field_overflow OR invalid_parameter_value THEN
    RETURN NULL;
END $$;
COMMENT ON FUNCTION jobs.parse_timestamptz(text) IS
    'Internal: value as a timestamptz, or NULL when it is not one. Not granted to any role.';
REVOKE ALL ON FUNCTION jobs.parse_timestamptz(text) FROM PUBLIC;
COMMIT;
