-- Deploy jobfence:raise_lease_lost to pg
-- requires: job
BEGIN;
-- Called after an authority-predicate UPDATE matched no row: tell the caller whether the job
-- does not exist (JB002) or its lease is not the caller's (JB001). Who holds the job now and
-- at which lease_version is said only to the session role that claimed it: anyone else would
-- learn exactly the fence a forged write needs.
CREATE OR REPLACE FUNCTION jobs.raise_lease_lost(caller text, job_id bigint, worker text, lease_version bigint)
RETURNS void
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    current jobs.job;
BEGIN
    SELECT * INTO current FROM jobs.job AS j WHERE j.id = raise_lease_lost.job_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION '%: job % not found', caller, raise_lease_lost.job_id
            USING ERRCODE = 'JB002', HINT = 'Check the id; pruned jobs no longer exist.';
    END IF;
    IF current.claim_role IS DISTINCT FROM quote_ident(session_user)::regrole THEN
        RAISE EXCEPTION '%: lease lost on job % (you: worker %, lease_version %): this session''s role does not hold that lease',
            caller, current.id, raise_lease_lost.worker, raise_lease_lost.lease_version
            USING ERRCODE = 'JB001',
                  HINT = 'Another worker or the reaper took this job over, or the lease was claimed by another role. Discard this result: the current owner''s write wins.';
    END IF;
    IF current.status IN ('done', 'failed') AND current.lease_version = raise_lease_lost.lease_version THEN
        -- The caller's own lease, already ended: a repeated or late write, not a takeover.
        RAISE EXCEPTION '%: lease lost on job % (you: worker %, lease_version %): that lease already ended, the job is %',
            caller, current.id, raise_lease_lost.worker, raise_lease_lost.lease_version, current.status
            USING ERRCODE = 'JB001',
                  HINT = 'The job finished under this lease (see jobs.events); a second write to it changes nothing.';
    END IF;
    RAISE EXCEPTION '%: lease lost on job % (you: worker %, lease_version %; now: status %, owned_by %, lease_version %)',
        caller, current.id, raise_lease_lost.worker, raise_lease_lost.lease_version,
        current.status, coalesce(current.owned_by, 'nobody'), current.lease_version
        USING ERRCODE = 'JB001',
              HINT = 'Another worker of your role or the reaper took this job over, or the lease token did not match. Discard this result: the current owner''s write wins.';
END $$;
COMMENT ON FUNCTION jobs.raise_lease_lost(text, bigint, text, bigint) IS
    'Internal: raise JB002 (no such job) or JB001 (lease lost; the current owner and lease_version only for the session role that claimed the job). Not granted to any role.';
REVOKE ALL ON FUNCTION jobs.raise_lease_lost(text, bigint, text, bigint) FROM PUBLIC;
COMMIT;
