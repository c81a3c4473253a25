-- Deploy jobfence:types to pg
-- requires: job_type
BEGIN;
CREATE OR REPLACE FUNCTION jobs.types()
RETURNS SETOF jobs.job_type
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
BEGIN
    -- Read-only: lets a worker that may not declare kinds check the ones it serves.
    RETURN QUERY SELECT * FROM jobs.job_type AS t ORDER BY t.kind;
END $$;
COMMENT ON FUNCTION jobs.types() IS
    'Every declared kind with its definition, by kind. Readable by every jobs role; only jobs.define_type writes them.';
REVOKE ALL ON FUNCTION jobs.types() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jobs.types() TO jobs_producer, jobs_worker, jobs_admin;
COMMIT;
