-- Deploy jobfence:cancel to pg
-- requires: outcome
-- requires: end_unheld
-- requires: own_jobs_only
BEGIN;
CREATE OR REPLACE FUNCTION jobs.cancel(job_id bigint, reason text DEFAULT 'cancelled')
RETURNS jobs.outcome
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    target jobs.job;
    why text;
    -- With producer ownership on, another role's job is "not found" (JB002): refusing it
    -- with another code would tell a producer which ids exist. Decided before the row is
    -- locked, so a refused call never holds another producer's job.
    confined boolean := jobs.own_jobs_only(reading => false);
BEGIN
    -- The reason is stored as the job's error and in its event: bounded like any other text.
    IF octet_length(reason) > 4096 THEN
        RAISE EXCEPTION 'jobs.cancel: reason is % bytes long; the limit is 4096', octet_length(reason)
            USING ERRCODE = '22023', HINT = 'Pass a short reason; keep long details in your own records.';
    END IF;
    why := coalesce(nullif(btrim(reason), ''), 'cancelled');
    SELECT * INTO target FROM jobs.job AS j
     WHERE j.id = cancel.job_id AND (NOT confined OR j.submitted_by = quote_ident(session_user)::regrole)
       FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'jobs.cancel: job % not found', job_id
            USING ERRCODE = 'JB002', HINT = 'Check the id; pruned jobs no longer exist.';
    END IF;

    IF target.status IN ('queued', 'enqueue_failed') THEN
        RETURN (target.id, true, 'failed'::jobs.status, target.run_after,
                jobs.end_unheld(ARRAY[target.id], 'cancelled', ARRAY[why]))::jobs.outcome;
    END IF;

    IF target.status = 'processing' THEN
        -- Cooperative: the worker sees the flag through heartbeat and stops; if it does not,
        -- fail or reap turn the job to failed instead of retrying it. A repeated request is a no-op.
        IF target.cancel_requested_at IS NULL THEN
            UPDATE jobs.job AS j SET cancel_requested_at = now(), updated_at = now() WHERE j.id = target.id;
            -- The request is recorded after the lease's claim, which until now the job row
            -- alone held (docs/design.md "What is recorded where"): the claim's row first,
            -- unless release 0.1 wrote it. The same rule as jobs.finish_leases'.
            INSERT INTO jobs.event (job_id, at, from_status, to_status, lease_version, worker, session_role, reason, error)
            SELECT e.job_id, e.at, e.from_status, e.to_status, e.lease_version, e.worker, e.session_role, e.reason, e.error
              FROM (VALUES
                   (1, target.id, target.claimed_at, 'queued'::jobs.status, 'processing'::jobs.status, target.lease_version,
                    target.owned_by, target.claim_role, 'claimed', NULL::text),
                   (2, target.id, now(), 'processing'::jobs.status, 'processing'::jobs.status, target.lease_version,
                    target.owned_by, quote_ident(session_user)::regrole, 'cancel_requested', why))
                   AS e(step, job_id, at, from_status, to_status, lease_version, worker, session_role, reason, error)
             WHERE e.step = 2 OR NOT EXISTS (SELECT 1 FROM jobs.event AS c
                                              WHERE c.job_id = target.id AND c.reason = 'claimed'
                                                AND c.lease_version = target.lease_version)
             ORDER BY e.step;
        END IF;
        RETURN (target.id, true, target.status, target.run_after, '{}'::bigint[])::jobs.outcome;
    END IF;

    -- done or failed: nothing to cancel.
    RETURN (target.id, false, target.status, target.run_after, '{}'::bigint[])::jobs.outcome;
END $$;
COMMENT ON FUNCTION jobs.cancel(bigint, text) IS
    'Cancel a job: queued/enqueue_failed -> failed at once; processing -> cancel requested (seen by heartbeat; fail and reap then end it as failed); terminal -> no-op, accepted = false. JB002 for an unknown job, and with jobs.producer_policy.ownership on for another role''s job (but for jobs_admin members). 22023 for a reason over 4096 bytes.';
REVOKE ALL ON FUNCTION jobs.cancel(bigint, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jobs.cancel(bigint, text) TO jobs_producer, jobs_admin;
COMMIT;
