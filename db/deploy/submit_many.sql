-- Deploy jobfence:submit_many to pg
-- requires: insert_jobs
BEGIN;
CREATE OR REPLACE FUNCTION jobs.submit_many(specs jsonb)
RETURNS SETOF jobs.job
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
BEGIN
    -- Through an array, not (r.job).*: that expands into one field selection per column, each
    -- walking the row from its first column, for every row (a sixteenth of a 1,000-spec
    -- submit's time); unnest splits each row once.
    RETURN QUERY SELECT * FROM unnest(ARRAY(
        SELECT r.job FROM jobs.insert_jobs('jobs.submit_many', submit_many.specs, NULL, false) AS r));
END $$;
COMMENT ON FUNCTION jobs.submit_many(jsonb) IS
    'Create many queued jobs in one call, all or nothing; returns them in input order (for a repeated idempotency key, the job holding it, as a debounce left it). specs: [{kind, payload, idempotency_key, run_after, ordering_key, notify, priority, unique_while, unique_for, debounce, traceparent, depends_on, on_dependency_failure, concurrency_key}], at most 10000 (more: 22023).';
REVOKE ALL ON FUNCTION jobs.submit_many(jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jobs.submit_many(jsonb) TO jobs_producer, jobs_admin;
COMMIT;
