-- Deploy jobfence:heartbeat_with_token to pg
-- requires: heartbeat_type
-- requires: raise_lease_lost
-- requires: check_worker
-- requires: extend_leases
BEGIN;
-- jobs.heartbeat with the lease token the claim returned.
CREATE OR REPLACE FUNCTION jobs.heartbeat(job_id bigint, worker text, lease_version bigint, token uuid)
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
    SELECT e.held, e.alive, e.cancel_requested, e.lease_expires_at
      INTO held, answer.alive, answer.cancel_requested, answer.lease_expires_at
      FROM jobs.extend_leases(ARRAY[job_id], worker, ARRAY[lease_version], ARRAY[token]) AS e;
    IF held IS NULL THEN
        -- Locked elsewhere: wait for it, then decide on the row's newest version.
        PERFORM 1 FROM jobs.job AS j WHERE j.id = heartbeat.job_id FOR UPDATE;
        SELECT e.held, e.alive, e.cancel_requested, e.lease_expires_at
          INTO held, answer.alive, answer.cancel_requested, answer.lease_expires_at
          FROM jobs.extend_leases(ARRAY[job_id], worker, ARRAY[lease_version], ARRAY[token]) AS e;
    END IF;
    IF NOT held THEN
        PERFORM jobs.raise_lease_lost('jobs.heartbeat', job_id, worker, lease_version);
    END IF;
    RETURN answer;
END $$;
COMMENT ON FUNCTION jobs.heartbeat(bigint, text, bigint, uuid) IS
    'jobs.heartbeat presenting the lease token from claim_*_with_token: JB001 also when token is not the lease''s.';
REVOKE ALL ON FUNCTION jobs.heartbeat(bigint, text, bigint, uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jobs.heartbeat(bigint, text, bigint, uuid) TO jobs_worker, jobs_admin;
COMMIT;
