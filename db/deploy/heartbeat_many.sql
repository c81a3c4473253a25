-- Deploy jobfence:heartbeat_many to pg
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
    PERFORM jobs.check_worker('jobs.heartbeat_many', heartbeat_many.worker);
    IF heartbeat_many.job_ids IS NULL OR heartbeat_many.lease_versions IS NULL
       OR cardinality(heartbeat_many.job_ids) <> cardinality(heartbeat_many.lease_versions) THEN
        RAISE EXCEPTION 'jobs.heartbeat_many: job_ids (%) and lease_versions (%) must be arrays of the same length',
            coalesce(cardinality(heartbeat_many.job_ids)::text, 'NULL'),
            coalesce(cardinality(heartbeat_many.lease_versions)::text, 'NULL')
            USING ERRCODE = '22023', HINT = 'Item i is (job_ids[i], lease_versions[i]): every lease the worker holds.';
    END IF;
    -- The same rule as jobs.heartbeat, for every lease of a worker at once, never waiting on
    -- a row lock (a completion in flight, a reaper's sweep): such an item comes back with
    -- held = NULL, to be asked again. The predicate lives in extend_leases.
    RETURN QUERY SELECT * FROM jobs.extend_leases(heartbeat_many.job_ids, heartbeat_many.worker,
                                                  heartbeat_many.lease_versions, NULL);
END $$;
COMMENT ON FUNCTION jobs.heartbeat_many(bigint[], text, bigint[]) IS
    'Extend every given lease the worker holds, in one statement that never waits on a row lock. One row per item in input order: held true (extended; alive and cancel_requested as jobs.heartbeat), false (lease lost, not held by this session role, or job unknown), NULL (row locked elsewhere: ask again).';
REVOKE ALL ON FUNCTION jobs.heartbeat_many(bigint[], text, bigint[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jobs.heartbeat_many(bigint[], text, bigint[]) TO jobs_worker, jobs_admin;
COMMIT;
