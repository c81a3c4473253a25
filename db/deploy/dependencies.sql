-- Deploy jobfence:dependencies to pg
-- requires: job_dependency
-- requires: own_jobs_only
-- requires: jobs_producer
-- requires: jobs_worker
-- requires: jobs_admin
BEGIN;
-- One side of the job graph (docs/sql-api.md "Dependencies"), for the dashboard's job page
-- and any caller walking the graph a level at a time.
CREATE OR REPLACE FUNCTION jobs.dependencies(job_id bigint)
RETURNS TABLE (depends_on bigint, kind text, status jobs.status, on_failure text, released_at timestamptz)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
    -- With producer ownership on, only the graph around the caller's own job.
    SELECT j.id, j.kind, j.status, d.on_failure, d.released_at
      FROM jobs.job_dependency AS d
      JOIN jobs.job AS j ON j.id = d.depends_on
     WHERE d.job_id = dependencies.job_id
       AND (NOT jobs.own_jobs_only(reading => true)
            OR EXISTS (SELECT 1 FROM jobs.job AS o
                        WHERE o.id = dependencies.job_id AND o.submitted_by = quote_ident(session_user)::regrole))
     ORDER BY j.id
$$;
COMMENT ON FUNCTION jobs.dependencies(bigint) IS
    'The jobs a job depends on (its parents in the job graph), by id, with each edge''s policy (on_failure) and when it stopped holding the job back (released_at; NULL: still waiting). Zero rows for a job without dependencies.';
REVOKE ALL ON FUNCTION jobs.dependencies(bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jobs.dependencies(bigint) TO jobs_producer, jobs_worker, jobs_admin;
COMMIT;
