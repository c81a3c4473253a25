-- Deploy jobfence:hold_lease to pg
-- requires: heartbeat_type
-- requires: raise_lease_lost
-- requires: extend_leases
BEGIN;
-- Internal: extend one lease or say why not, for jobs.heartbeat and jobs.progress. A row
-- locked elsewhere (extend_leases skips it) is waited for once and decided on its newest
-- version; a lease not held raises JB001 (JB002 for an unknown job) naming the caller.
CREATE OR REPLACE FUNCTION jobs.hold_lease(caller text, job_id bigint, worker text, lease_version bigint, token uuid)
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
    SELECT e.held, e.alive, e.cancel_requested, e.lease_expires_at
      INTO held, answer.alive, answer.cancel_requested, answer.lease_expires_at
      FROM jobs.extend_leases(ARRAY[job_id], worker, ARRAY[lease_version], ARRAY[token]) AS e;
    IF held IS NULL THEN
        PERFORM 1 FROM jobs.job AS j WHERE j.id = hold_lease.job_id FOR UPDATE;
        SELECT e.held, e.alive, e.cancel_requested, e.lease_expires_at
          INTO held, answer.alive, answer.cancel_requested, answer.lease_expires_at
          FROM jobs.extend_leases(ARRAY[job_id], worker, ARRAY[lease_version], ARRAY[token]) AS e;
    END IF;
    IF NOT held THEN
        PERFORM jobs.raise_lease_lost(caller, job_id, worker, lease_version);
    END IF;
    RETURN answer;
END $$;
COMMENT ON FUNCTION jobs.hold_lease(text, bigint, text, bigint, uuid) IS
    'Internal: extend one lease (waiting once for a row locked elsewhere) and answer as a heartbeat; JB001/JB002 naming caller when it is not held. Not granted to any role.';
REVOKE ALL ON FUNCTION jobs.hold_lease(text, bigint, text, bigint, uuid) FROM PUBLIC;
COMMIT;
