-- Deploy jobfence:fail to pg
-- requires: outcome
-- requires: raise_lease_lost
-- requires: finish_leases
-- requires: check_worker
BEGIN;
CREATE OR REPLACE FUNCTION jobs.fail(job_id bigint, worker text, lease_version bigint, error text, retryable boolean DEFAULT true)
RETURNS jobs.outcome
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    answer jobs.outcome;
BEGIN
    PERFORM jobs.check_worker('jobs.fail', worker);
    IF error IS NULL OR btrim(error) = '' THEN
        RAISE EXCEPTION 'jobs.fail: error must be a non-empty description of the failure'
            USING ERRCODE = '22023', HINT = 'Pass the exception text, e.g. ''timeout'' or ''HTTP 503 from billing''.';
    END IF;
    IF retryable IS NULL THEN
        RAISE EXCEPTION 'jobs.fail: retryable must be true or false, not NULL'
            USING ERRCODE = '22023', HINT = 'Use false for permanent errors that no retry can fix.';
    END IF;
    SELECT * INTO answer
      FROM jobs.finish_leases(ARRAY[job_id], ARRAY[worker], ARRAY[lease_version],
                              ARRAY[CASE WHEN retryable THEN 'retry' ELSE 'fatal' END], '{NULL}', ARRAY[error], NULL, 'jobs.fail');
    IF NOT answer.accepted THEN
        PERFORM jobs.raise_lease_lost('jobs.fail', job_id, worker, lease_version);
    END IF;
    RETURN answer;
END $$;
COMMENT ON FUNCTION jobs.fail(bigint, text, bigint, text, boolean) IS
    'Record a failed attempt if worker still holds lease_version: back to queued after an exponential backoff while the retry budget lasts, else failed (also when not retryable or cancel was requested). JB001/JB002 as complete; 22023 for an error over 64 KiB.';
REVOKE ALL ON FUNCTION jobs.fail(bigint, text, bigint, text, boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jobs.fail(bigint, text, bigint, text, boolean) TO jobs_worker, jobs_admin;
COMMIT;
