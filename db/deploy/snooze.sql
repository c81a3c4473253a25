-- Deploy jobfence:snooze to pg
-- requires: outcome
-- requires: finish_lease
-- requires: check_worker
BEGIN;
-- "Not now": the handler gives the job back, to run again after delay, without spending its
-- retry budget. A fenced exit from processing like complete and fail, so finish_leases owns it.
CREATE OR REPLACE FUNCTION jobs.snooze(job_id bigint, worker text, lease_version bigint, delay interval,
                                       token uuid DEFAULT NULL)
RETURNS jobs.outcome
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
    PERFORM jobs.check_worker('jobs.snooze', worker);
    RETURN jobs.finish_lease('jobs.snooze', job_id, worker, lease_version, 'snooze', NULL, NULL, token, delay);
END $$;
COMMENT ON FUNCTION jobs.snooze(bigint, text, bigint, interval, uuid) IS
    'processing -> queued after delay (0 to 30 days), the retry budget untouched (event snoozed, lease_version + 1); past jobs.max_snoozes() snoozes the job fails instead, and a cancel request cancels it. JB001 when the lease is not held (token checked as in complete). 22023 for a delay out of range. The caller signals the job (outcome.run_after).';
REVOKE ALL ON FUNCTION jobs.snooze(bigint, text, bigint, interval, uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jobs.snooze(bigint, text, bigint, interval, uuid) TO jobs_worker, jobs_admin;
COMMIT;
