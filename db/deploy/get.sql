-- Deploy jobfence:get to pg
-- requires: job
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
    IF NOT FOUND THEN
        RAISE EXCEPTION 'jobs.get: job % not found', job_id
            USING ERRCODE = 'JB002', HINT = 'Check the id; pruned jobs no longer exist.';
    END IF;
    RETURN found_job;
END $$;
COMMENT ON FUNCTION jobs.get(bigint) IS 'Read one job (the system of record for its status and result). JB002 when unknown.';
REVOKE ALL ON FUNCTION jobs.get(bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jobs.get(bigint) TO jobs_producer, jobs_worker, jobs_admin;
COMMIT;
