-- Deploy jobfence:heartbeat to pg
-- requires: heartbeat_type
-- requires: raise_lease_lost
-- requires: check_worker
BEGIN;
CREATE OR REPLACE FUNCTION jobs.heartbeat(job_id bigint, worker text, lease_version bigint)
RETURNS jobs.heartbeat
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    answer jobs.heartbeat;
BEGIN
    PERFORM jobs.check_worker('jobs.heartbeat', worker);
    -- Authority predicate inline. The lease grows by lease_timeout but never past
    -- claimed_at + timeout, and never shrinks. An expired lease nobody reaped yet still
    -- matches: nobody else holds it.
    UPDATE jobs.job AS j
       SET lease_expires_at = greatest(j.lease_expires_at, least(now() + j.lease_timeout, j.claimed_at + j.timeout)),
           updated_at = now()
     WHERE j.id = heartbeat.job_id
       AND j.status IS NOT DISTINCT FROM 'processing'  -- primary key, never a partial index: see jobs.claimable
       AND j.owned_by = heartbeat.worker
       AND j.lease_version = heartbeat.lease_version
    RETURNING now() < j.claimed_at + j.timeout, j.cancel_requested_at IS NOT NULL, j.lease_expires_at
         INTO answer.alive, answer.cancel_requested, answer.lease_expires_at;
    IF NOT FOUND THEN
        PERFORM jobs.raise_lease_lost('jobs.heartbeat', job_id, worker, lease_version);
    END IF;
    RETURN answer;
END $$;
COMMENT ON FUNCTION jobs.heartbeat(bigint, text, bigint) IS
    'Extend a held lease (never past claimed_at + timeout). Says whether the job may go on (alive) and whether a cancel was requested. JB001 when the lease is lost, JB002 for an unknown job.';
REVOKE ALL ON FUNCTION jobs.heartbeat(bigint, text, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jobs.heartbeat(bigint, text, bigint) TO jobs_worker, jobs_admin;
COMMIT;
