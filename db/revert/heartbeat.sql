-- Revert jobfence:heartbeat from pg: back to v0.1.0's two forms, the token overload without
-- defaults (heartbeat_with_token) and the token-less one (heartbeat), as the release shipped them.
BEGIN;
DROP FUNCTION jobs.heartbeat(bigint, text, bigint, uuid);
-- jobs.heartbeat with the lease token the claim returned.
CREATE OR REPLACE FUNCTION jobs.heartbeat(job_id bigint, worker text, lease_version bigint, token uuid)
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
    'jobs.heartbeat presenting the lease token from claim_*_with_token: JB001 also when token is not the lease''s.';
REVOKE ALL ON FUNCTION jobs.heartbeat(bigint, text, bigint, uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jobs.heartbeat(bigint, text, bigint, uuid) TO jobs_worker, jobs_admin;

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
