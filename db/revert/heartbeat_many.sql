-- Revert jobfence:heartbeat_many from pg: back to v0.1.0's two forms, the token overload without
-- defaults (heartbeat_many_with_token) and the token-less one (heartbeat_many), as the release shipped them.
BEGIN;
DROP FUNCTION jobs.heartbeat_many(bigint[], text, bigint[], uuid[]);
-- jobs.heartbeat_many with the lease token of each item.
CREATE OR REPLACE FUNCTION jobs.heartbeat_many(job_ids bigint[], worker text, lease_versions bigint[], tokens uuid[])
RETURNS TABLE (job_id bigint, held boolean, alive boolean, cancel_requested boolean, lease_expires_at timestamptz)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
    PERFORM jobs.check_worker('jobs.heartbeat_many', heartbeat_many.worker);
    IF heartbeat_many.job_ids IS NULL OR heartbeat_many.lease_versions IS NULL
       OR cardinality(heartbeat_many.job_ids) <> cardinality(heartbeat_many.lease_versions)
       OR (heartbeat_many.tokens IS NOT NULL
           AND cardinality(heartbeat_many.job_ids) <> cardinality(heartbeat_many.tokens)) THEN
        RAISE EXCEPTION 'jobs.heartbeat_many: job_ids (%), lease_versions (%) and tokens (%) must be arrays of the same length',
            coalesce(cardinality(heartbeat_many.job_ids)::text, 'NULL'),
            coalesce(cardinality(heartbeat_many.lease_versions)::text, 'NULL'),
            coalesce(cardinality(heartbeat_many.tokens)::text, 'NULL')
            USING ERRCODE = '22023', HINT = 'Item i is (job_ids[i], lease_versions[i], tokens[i]): every lease the worker holds; tokens NULL for none.';
    END IF;
    RETURN QUERY SELECT * FROM jobs.extend_leases(heartbeat_many.job_ids, heartbeat_many.worker,
                                                  heartbeat_many.lease_versions, heartbeat_many.tokens);
END $$;
COMMENT ON FUNCTION jobs.heartbeat_many(bigint[], text, bigint[], uuid[]) IS
    'jobs.heartbeat_many presenting each lease''s token: held = false also where tokens[i] is not that lease''s.';
REVOKE ALL ON FUNCTION jobs.heartbeat_many(bigint[], text, bigint[], uuid[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jobs.heartbeat_many(bigint[], text, bigint[], uuid[]) TO jobs_worker, jobs_admin;

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
