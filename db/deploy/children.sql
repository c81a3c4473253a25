-- Deploy jobfence:children to pg
-- requires: own_jobs_only
-- requires: job
BEGIN;
CREATE OR REPLACE FUNCTION jobs.children(job_id bigint)
RETURNS SETOF jobs.job
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
    -- With producer ownership on, only children of the caller's own coordinator.
    SELECT c.* FROM jobs.job AS c
     WHERE c.parent_id = children.job_id
       AND (NOT jobs.own_jobs_only(reading => true)
            OR EXISTS (SELECT 1 FROM jobs.job AS p
                        WHERE p.id = children.job_id AND p.submitted_by = quote_ident(session_user)::regrole))
     ORDER BY c.id
$$;
COMMENT ON FUNCTION jobs.children(bigint) IS
    'A fan-in coordinator''s children with their status, result and error, by id: what the coordinator reads when it runs. Zero rows for a job without children.';
REVOKE ALL ON FUNCTION jobs.children(bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jobs.children(bigint) TO jobs_producer, jobs_worker, jobs_admin;
COMMIT;
