-- Deploy jobfence:heartbeat to pg
-- requires: heartbeat_with_token
BEGIN;
-- One token convention (docs/design.md, "Lease tokens"): a write to a held lease takes
-- the token as its last parameter, DEFAULT NULL. The released token-less overload goes
-- in the same transaction as the default arrives, so a call without a token always
-- resolves, by position or by name, to this one body.
DROP FUNCTION jobs.heartbeat(bigint, text, bigint);
CREATE OR REPLACE FUNCTION jobs.heartbeat(job_id bigint, worker text, lease_version bigint, token uuid DEFAULT NULL)
RETURNS jobs.heartbeat
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
    PERFORM jobs.check_worker('jobs.heartbeat', worker);
    RETURN jobs.hold_lease('jobs.heartbeat', job_id, worker, lease_version, token);
END $$;
COMMENT ON FUNCTION jobs.heartbeat(bigint, text, bigint, uuid) IS
    'Extend a held lease (never past claimed_at + timeout). Says whether the job may go on (alive) and whether a cancel was requested. JB001 when the lease is lost or not held by this session role (or a lease token is required), JB002 for an unknown job. token: the lease token from claim_*_with_token (NULL: none; required when jobs.configure_leases requires it): JB001 (nothing written) also when it is not the lease''s.';
REVOKE ALL ON FUNCTION jobs.heartbeat(bigint, text, bigint, uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jobs.heartbeat(bigint, text, bigint, uuid) TO jobs_worker, jobs_admin;
COMMIT;
