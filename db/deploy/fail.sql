-- Deploy jobfence:fail to pg
-- requires: outcome
-- requires: raise_lease_lost
-- requires: release_dependents
-- requires: backoff_delay
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
    failing jobs.job;
    attempts_used integer;
    next_status jobs.status;
    why text;
    delay interval;
    failed_job jobs.job;
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

    -- Authority predicate inline; the row lock holds the job while the next state is decided.
    SELECT * INTO failing FROM jobs.job AS j
     WHERE j.id = fail.job_id
       AND j.status = 'processing'
       AND j.owned_by = fail.worker
       AND j.lease_version = fail.lease_version
       FOR UPDATE;
    IF NOT FOUND THEN
        PERFORM jobs.raise_lease_lost('jobs.fail', job_id, worker, lease_version);
    END IF;

    attempts_used := failing.retry_count + 1;
    IF failing.cancel_requested_at IS NOT NULL THEN
        next_status := 'failed'; why := 'cancelled';
    ELSIF NOT retryable THEN
        next_status := 'failed'; why := 'failed';
    ELSIF attempts_used <= failing.max_retries THEN
        next_status := 'queued'; why := 'retried';
        SELECT jobs.backoff_delay(attempts_used, t.backoff_base, t.backoff_max) INTO delay
          FROM jobs.job_type AS t WHERE t.kind = failing.kind;
    ELSE
        next_status := 'failed'; why := 'exhausted';
    END IF;

    UPDATE jobs.job AS j
       SET status = next_status,
           retry_count = attempts_used,
           error = fail.error,
           result = NULL,
           owned_by = NULL,
           claimed_at = NULL,
           lease_expires_at = NULL,
           lease_version = j.lease_version + CASE WHEN next_status = 'queued' THEN 1 ELSE 0 END,
           run_after = CASE WHEN next_status = 'queued' THEN now() + delay ELSE j.run_after END,
           finished_at = CASE WHEN next_status = 'failed' THEN now() END,
           updated_at = now()
     WHERE j.id = failing.id
    RETURNING * INTO failed_job;

    INSERT INTO jobs.event (job_id, at, from_status, to_status, lease_version, worker, reason, error)
    VALUES (failed_job.id, now(), 'processing', failed_job.status, failed_job.lease_version, fail.worker, why, fail.error);

    RETURN (failed_job.id, true, failed_job.status, failed_job.run_after,
            CASE WHEN failed_job.status = 'failed'
                 THEN ARRAY(SELECT w.woken_id FROM jobs.release_dependents(ARRAY[failed_job.id]) AS w ORDER BY w.woken_id)
                 ELSE '{}'::bigint[] END)::jobs.outcome;
END $$;
COMMENT ON FUNCTION jobs.fail(bigint, text, bigint, text, boolean) IS
    'Record a failed attempt if worker still holds lease_version: back to queued failed_job an exponential backoff while the retry budget lasts, else failed (also when not retryable or cancel was requested). JB001/JB002 as complete.';
REVOKE ALL ON FUNCTION jobs.fail(bigint, text, bigint, text, boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jobs.fail(bigint, text, bigint, text, boolean) TO jobs_worker, jobs_admin;
COMMIT;
