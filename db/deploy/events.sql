-- Deploy jobfence:events to pg
-- requires: own_jobs_only
-- requires: event
-- requires: history
BEGIN;
CREATE OR REPLACE FUNCTION jobs.events(job_id bigint)
RETURNS SETOF jobs.event
-- plpgsql, not sql: its plan is kept for the session, where a SQL function plans its query
-- again at every call, and planning an index probe into each day partition of jobs.event
-- costs several times the probes themselves.
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
BEGIN
    -- With producer ownership on, another role's job has no history to show (as unknown);
    -- nor has a pruned job, whose history waits in its day partitions to be dropped whole.
    -- jobs.history: what the job row records (the submission; a lease's claim and its
    -- claimant's completion) and jobs.event's rows (docs/design.md "What is recorded where").
    RETURN QUERY
    SELECT e.* FROM jobs.history AS e
     WHERE e.job_id = events.job_id
       AND EXISTS (SELECT 1 FROM jobs.job AS j
                    WHERE j.id = events.job_id
                      AND (NOT jobs.own_jobs_only(reading => true)
                           OR j.submitted_by = quote_ident(session_user)::regrole))
     ORDER BY e.id;
END $$;
COMMENT ON FUNCTION jobs.events(bigint) IS
    'A job''s transition history (jobs.history), oldest first; what the job row records is read from it: the submission (id: the job''s id negated), and a lease''s claim and its claimant''s completion (ids 2^52 + 2 × the job''s id, + 1). From/to status, lease_version after the transition, worker (the name given), session_role (the login role that acted), reason, error. Zero rows for an unknown job.';
REVOKE ALL ON FUNCTION jobs.events(bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jobs.events(bigint) TO jobs_producer, jobs_admin;
COMMIT;
