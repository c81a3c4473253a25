-- Deploy jobfence:submit_many to pg
-- requires: insert_jobs
BEGIN;
CREATE OR REPLACE FUNCTION jobs.submit_many(specs jsonb)
RETURNS SETOF jobs.job
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
DECLARE
    inserted jobs.job[];
BEGIN
    -- The array as the transition made it, unnested once: not (r.job).* of a set, which
    -- expands into one field selection per column, each walking the row from its first
    -- column, for every row (a sixteenth of a 1,000-spec submit's time), nor a set stored
    -- and read back before it is returned (docs/performance.md, "A submit's rows, copied
    -- fewer times").
    SELECT r.job_rows INTO inserted
      FROM jobs.insert_job_rows('jobs.submit_many', submit_many.specs, NULL, false) AS r;
    RETURN QUERY SELECT * FROM unnest(inserted);
END $$;
COMMENT ON FUNCTION jobs.submit_many(jsonb) IS
    'Create many queued jobs in one call, all or nothing; returns them in input order (for a repeated idempotency key, the job holding it, as a debounce left it). specs: [{kind, payload, idempotency_key, run_after, ordering_key, notify, priority, unique_while, unique_for, debounce, traceparent, depends_on, on_dependency_failure, concurrency_key}], at most 10000 (more: 22023).';
REVOKE ALL ON FUNCTION jobs.submit_many(jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jobs.submit_many(jsonb) TO jobs_producer, jobs_admin;
COMMIT;
