-- Deploy jobfence:heartbeat_many to pg
-- requires: heartbeat_many_with_token
-- requires: job
-- requires: check_worker
-- requires: extend_leases
BEGIN;
CREATE OR REPLACE FUNCTION jobs.heartbeat_many(job_ids bigint[], worker text, lease_versions bigint[])
RETURNS TABLE (job_id bigint, held boolean, alive boolean, cancel_requested boolean, lease_expires_at timestamptz)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
    -- The token form with no tokens: one body for both (docs/security.md).
    RETURN QUERY SELECT * FROM jobs.heartbeat_many(job_ids, worker, lease_versions, NULL::uuid[]);
END $$;
COMMENT ON FUNCTION jobs.heartbeat_many(bigint[], text, bigint[]) IS
    'Extend every given lease the worker holds, in one statement that never waits on a row lock. One row per item in input order: held true (extended; alive and cancel_requested as jobs.heartbeat), false (lease lost, not held by this session role, or job unknown), NULL (row locked elsewhere: ask again).';
REVOKE ALL ON FUNCTION jobs.heartbeat_many(bigint[], text, bigint[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jobs.heartbeat_many(bigint[], text, bigint[]) TO jobs_worker, jobs_admin;
COMMIT;
