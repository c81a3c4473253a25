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
SET enable_seqscan = off
SET enable_nestloop = off
AS $$
#variable_conflict use_column
DECLARE
    refreshed bigint[];
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
    WITH input AS (
        SELECT i.id, i.lease_version
          FROM unnest(heartbeat_many.job_ids, heartbeat_many.lease_versions) AS i(id, lease_version)
    ), locked AS (
        -- One primary-key lookup per item (LATERAL with LIMIT keeps the items outside; IS
        -- NOT DISTINCT FROM proves no partial index's predicate: see jobs.claimable), in id
        -- order, so two keepers never lock in opposite orders.
        SELECT l.id
          FROM (SELECT DISTINCT i.id, i.lease_version FROM input AS i ORDER BY i.id) AS i
         CROSS JOIN LATERAL (
               SELECT j.id
                 FROM jobs.job AS j
                WHERE j.id = i.id
                  AND j.status IS NOT DISTINCT FROM 'processing'
                  AND j.owned_by = heartbeat_many.worker
                  AND j.lease_version = i.lease_version
                LIMIT 1
                  FOR UPDATE SKIP LOCKED) AS l
    ), beat AS (
        UPDATE jobs.job AS j
           SET lease_expires_at = greatest(j.lease_expires_at, least(now() + j.lease_timeout, j.claimed_at + j.timeout)),
               updated_at = now()
          FROM locked AS l
         WHERE j.id = l.id
           AND j.id = ANY (heartbeat_many.job_ids)
        RETURNING j.id
    )
    SELECT coalesce(array_agg(b.id), '{}') INTO refreshed FROM beat AS b;

    -- A new statement sees the refreshed rows (held by this transaction until it ends).
    RETURN QUERY
    SELECT i.id, a.held,
           CASE WHEN a.held THEN now() < cur.claimed_at + cur.timeout END,
           CASE WHEN a.held THEN cur.cancel_requested_at IS NOT NULL END,
           CASE WHEN a.held THEN cur.lease_expires_at END
      FROM unnest(heartbeat_many.job_ids, heartbeat_many.lease_versions) WITH ORDINALITY AS i(id, lease_version, ord)
      LEFT JOIN LATERAL (SELECT j.* FROM jobs.job AS j WHERE j.id = i.id LIMIT 1) AS cur ON true
     CROSS JOIN LATERAL (
           SELECT CASE WHEN cur.status IS DISTINCT FROM 'processing' OR cur.owned_by IS DISTINCT FROM heartbeat_many.worker
                            OR cur.lease_version IS DISTINCT FROM i.lease_version THEN false
                       WHEN i.id = ANY (refreshed) THEN true
                  END AS held) AS a
     ORDER BY i.ord;
END $$;
COMMENT ON FUNCTION jobs.heartbeat_many(bigint[], text, bigint[]) IS
    'Extend every given lease the worker holds, in one statement that never waits on a row lock. One row per item in input order: held true (extended; alive and cancel_requested as jobs.heartbeat), false (lease lost or job unknown), NULL (row locked elsewhere: ask again).';
REVOKE ALL ON FUNCTION jobs.heartbeat_many(bigint[], text, bigint[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jobs.heartbeat_many(bigint[], text, bigint[]) TO jobs_worker, jobs_admin;
COMMIT;
