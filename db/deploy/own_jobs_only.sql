-- Deploy jobfence:own_jobs_only to pg
-- requires: producer_policy
BEGIN;
-- The one rule of producer ownership (jobs.producer_policy), for every function that reads or
-- acts on jobs by id: true when the caller may touch only the jobs its own login role
-- submitted (jobs.job.submitted_by = session_user). Members of jobs_admin are never confined;
-- for reads (reading => true) neither are members of jobs_worker, whom claiming shows any
-- job's payload anyway.
CREATE OR REPLACE FUNCTION jobs.own_jobs_only(reading boolean)
RETURNS boolean
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
BEGIN
    RETURN coalesce((SELECT p.ownership FROM jobs.producer_policy AS p), false)
       AND NOT pg_has_role(session_user, 'jobs_admin', 'MEMBER')
       AND NOT (reading AND pg_has_role(session_user, 'jobs_worker', 'MEMBER'));
END $$;
COMMENT ON FUNCTION jobs.own_jobs_only(boolean) IS
    'Internal: whether producer ownership confines the caller to the jobs its login role submitted (reading: also exempts jobs_worker members). Not granted to any role.';
REVOKE ALL ON FUNCTION jobs.own_jobs_only(boolean) FROM PUBLIC;
COMMIT;
