-- Deploy jobfence:heartbeat_many to pg
-- requires: job
-- requires: check_worker
BEGIN;
CREATE OR REPLACE FUNCTION jobs.heartbeat_many(job_ids bigint[], worker text, lease_versions bigint[])
RETURNS TABLE (job_id bigint, held boolean, alive boolean, cancel_requested boolean, lease_expires_at timestamptz)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
BEGIN
    PERFORM jobs.check_worker('jobs.heartbeat_many', heartbeat_many.worker);
    IF heartbeat_many.job_ids IS NULL OR heartbeat_many.lease_versions IS NULL
       OR cardinality(heartbeat_many.job_ids) <> cardinality(heartbeat_many.lease_versions) THEN
        RAISE EXCEPTION 'jobs.heartbeat_many: job_ids (%) and lease_versions (%) must be arrays of the same length',
            coalesce(cardinality(heartbeat_many.job_ids)::text, 'NULL'),
            coalesce(cardinality(heartbeat_many.lease_versions)::text, 'NULL')
            USING ERRCODE = '22023', HINT = 'Item i is (job_ids[i], lease_versions[i]): every lease the worker holds.';
    END IF;
    -- The same rule as jobs.heartbeat, for every lease of a worker at once. SKIP LOCKED: a
    -- row locked elsewhere (a completion in flight, a reaper's sweep) must not hold up the
    -- other leases' refresh; such an item comes back with held = NULL, to be asked again.
    RETURN QUERY
    WITH input AS (
        SELECT i.id, i.lease_version, i.ord
          FROM unnest(heartbeat_many.job_ids, heartbeat_many.lease_versions) WITH ORDINALITY AS i(id, lease_version, ord)
    ), locked AS (
        SELECT j.id
          FROM input AS i
          JOIN jobs.job AS j ON j.id = i.id
         WHERE j.status = 'processing'
           AND j.owned_by = heartbeat_many.worker
           AND j.lease_version = i.lease_version
         ORDER BY j.id
           FOR UPDATE OF j SKIP LOCKED
    ), beat AS (
        UPDATE jobs.job AS j
           SET lease_expires_at = greatest(j.lease_expires_at, least(now() + j.lease_timeout, j.claimed_at + j.timeout)),
               updated_at = now()
          FROM locked AS l
         WHERE j.id = l.id
        RETURNING j.id, now() < j.claimed_at + j.timeout AS alive, j.cancel_requested_at IS NOT NULL AS cancel_requested,
                  j.lease_expires_at
    )
    SELECT i.id,
           CASE WHEN b.id IS NOT NULL THEN true
                WHEN cur.status = 'processing' AND cur.owned_by = heartbeat_many.worker
                     AND cur.lease_version = i.lease_version THEN NULL
                ELSE false END,
           b.alive, b.cancel_requested, b.lease_expires_at
      FROM input AS i
      LEFT JOIN beat AS b ON b.id = i.id
      LEFT JOIN jobs.job AS cur ON cur.id = i.id
     ORDER BY i.ord;
END $$;
COMMENT ON FUNCTION jobs.heartbeat_many(bigint[], text, bigint[]) IS
    'Extend every given lease the worker holds, in one statement that never waits on a row lock. One row per item in input order: held true (extended; alive and cancel_requested as jobs.heartbeat), false (lease lost or job unknown), NULL (row locked elsewhere: ask again).';
REVOKE ALL ON FUNCTION jobs.heartbeat_many(bigint[], text, bigint[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jobs.heartbeat_many(bigint[], text, bigint[]) TO jobs_worker, jobs_admin;
COMMIT;
