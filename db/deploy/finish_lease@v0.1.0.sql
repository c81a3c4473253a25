-- Deploy jobfence:finish_lease to pg
-- requires: outcome
-- requires: finish_leases
-- requires: raise_lease_lost
BEGIN;
-- Internal: the single-lease exit behind jobs.complete, jobs.fail and jobs.snooze, the
-- mirror of jobs.hold_lease. One item through finish_leases; a lease not held raises JB001
-- (JB002 for an unknown job) naming the caller, so effects the caller wrote in the same
-- transaction roll back with it (the batched forms report accepted = false instead).
CREATE OR REPLACE FUNCTION jobs.finish_lease(caller text, job_id bigint, worker text, lease_version bigint,
                                             verdict text, result jsonb, error text, token uuid,
                                             delay interval DEFAULT NULL)
RETURNS jobs.outcome
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    answer jobs.outcome;
BEGIN
    SELECT * INTO answer
      FROM jobs.finish_leases(ARRAY[job_id], ARRAY[worker], ARRAY[lease_version], ARRAY[verdict], ARRAY[result],
                              ARRAY[error], ARRAY[token], caller, ARRAY[delay]);
    IF NOT answer.accepted THEN
        PERFORM jobs.raise_lease_lost(caller, job_id, worker, lease_version);
    END IF;
    RETURN answer;
END $$;
COMMENT ON FUNCTION jobs.finish_lease(text, bigint, text, bigint, text, jsonb, text, uuid, interval) IS
    'Internal: end one lease through finish_leases (verdict done, retry, fatal or snooze); JB001/JB002 naming caller when it is not held. Not granted to any role.';
REVOKE ALL ON FUNCTION jobs.finish_lease(text, bigint, text, bigint, text, jsonb, text, uuid, interval) FROM PUBLIC;
COMMIT;
