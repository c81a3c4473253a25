-- Deploy jobfence:raise_lease_lost to pg
-- requires: job
BEGIN;
-- Called after an authority-predicate UPDATE matched no row: tell the caller whether the job
-- does not exist (JB002) or someone else now holds it (JB001), with what the row says now.
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
    RAISE EXCEPTION '%: lease lost on job % (you: worker %, lease_version %; now: status %, owned_by %, lease_version %)',
        caller, current.id, raise_lease_lost.worker, raise_lease_lost.lease_version,
        current.status, coalesce(current.owned_by, 'nobody'), current.lease_version
        USING ERRCODE = 'JB001',
              HINT = 'Another worker or the reaper took this job over. Discard this result: the current owner''s write wins.';
END $$;
COMMENT ON FUNCTION jobs.raise_lease_lost(text, bigint, text, bigint) IS
    'Internal: raise JB002 (no such job) or JB001 (lease lost) with the row''s current owner. Not granted to any role.';
REVOKE ALL ON FUNCTION jobs.raise_lease_lost(text, bigint, text, bigint) FROM PUBLIC;
COMMIT;
