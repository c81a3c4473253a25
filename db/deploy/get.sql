-- Deploy jobfence:get to pg
-- requires: job
-- requires: own_jobs_only
BEGIN;
CREATE OR REPLACE FUNCTION jobs.get(job_id bigint)
RETURNS jobs.job
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    found_job jobs.job;
BEGIN
    SELECT * INTO found_job FROM jobs.job AS j WHERE j.id = get.job_id;
    -- With producer ownership on, another role's job reads as "not found" (JB002), so ids
    -- cannot be probed. Workers are exempt: claiming shows them any job's payload anyway.
    IF FOUND AND found_job.submitted_by <> quote_ident(session_user)::regrole
       AND jobs.own_jobs_only(reading => true) THEN
        found_job := NULL;
    END IF;
    IF found_job.id IS NULL THEN
        RAISE EXCEPTION 'jobs.get: job % not found', job_id
            USING ERRCODE = 'JB002', HINT = 'Check the id; pruned jobs no longer exist.';
    END IF;
    RETURN found_job;
END $$;
COMMENT ON FUNCTION jobs.get(bigint) IS
    'Read one job (the system of record for its status and result). JB002 when unknown, and with jobs.producer_policy.ownership on for another role''s job (but for jobs_admin and jobs_worker members).';
REVOKE ALL ON FUNCTION jobs.get(bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jobs.get(bigint) TO jobs_producer, jobs_worker, jobs_admin;
COMMIT;
