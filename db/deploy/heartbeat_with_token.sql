-- Deploy jobfence:heartbeat_with_token to pg
-- requires: heartbeat_type
-- requires: raise_lease_lost
-- requires: check_worker
-- requires: extend_leases
-- requires: hold_lease
BEGIN;
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
COMMIT;
