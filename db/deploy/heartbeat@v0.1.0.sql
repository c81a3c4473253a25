-- Deploy jobfence:heartbeat to pg
-- requires: heartbeat_with_token
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
BEGIN
    -- The token form with no token: one body for both (docs/security.md).
    RETURN jobs.heartbeat(job_id, worker, lease_version, NULL::uuid);
END $$;
COMMENT ON FUNCTION jobs.heartbeat(bigint, text, bigint) IS
    'Extend a held lease (never past claimed_at + timeout). Says whether the job may go on (alive) and whether a cancel was requested. JB001 when the lease is lost or not held by this session role (or a lease token is required), JB002 for an unknown job.';
REVOKE ALL ON FUNCTION jobs.heartbeat(bigint, text, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jobs.heartbeat(bigint, text, bigint) TO jobs_worker, jobs_admin;
COMMIT;
