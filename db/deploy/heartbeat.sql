-- Deploy jobfence:heartbeat to pg
-- requires: heartbeat_type
-- requires: raise_lease_lost
-- requires: check_worker
-- requires: extend_leases
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
    held boolean;
BEGIN
    PERFORM jobs.check_worker('jobs.heartbeat', worker);
    -- The authority predicate and the extension rule live in extend_leases.
    SELECT e.held, e.alive, e.cancel_requested, e.lease_expires_at
      INTO held, answer.alive, answer.cancel_requested, answer.lease_expires_at
      FROM jobs.extend_leases(ARRAY[job_id], worker, ARRAY[lease_version], NULL) AS e;
    IF held IS NULL THEN
        -- Locked elsewhere (a completion, a reaper): one lease may wait for it, then be
        -- decided on the row's newest version (our own lock is never skipped).
        PERFORM 1 FROM jobs.job AS j WHERE j.id = heartbeat.job_id FOR UPDATE;
        SELECT e.held, e.alive, e.cancel_requested, e.lease_expires_at
          INTO held, answer.alive, answer.cancel_requested, answer.lease_expires_at
          FROM jobs.extend_leases(ARRAY[job_id], worker, ARRAY[lease_version], NULL) AS e;
    END IF;
    IF NOT held THEN
        PERFORM jobs.raise_lease_lost('jobs.heartbeat', job_id, worker, lease_version);
    END IF;
    RETURN answer;
END $$;
COMMENT ON FUNCTION jobs.heartbeat(bigint, text, bigint) IS
    'Extend a held lease (never past claimed_at + timeout). Says whether the job may go on (alive) and whether a cancel was requested. JB001 when the lease is lost or not held by this session role (or a lease token is required), JB002 for an unknown job.';
REVOKE ALL ON FUNCTION jobs.heartbeat(bigint, text, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jobs.heartbeat(bigint, text, bigint) TO jobs_worker, jobs_admin;
COMMIT;
