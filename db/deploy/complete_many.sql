-- Deploy jobfence:complete_many to pg
-- requires: outcome
-- requires: release_dependents
-- requires: check_worker
BEGIN;
CREATE OR REPLACE FUNCTION jobs.complete_many(job_ids bigint[], worker text, lease_versions bigint[], results jsonb[])
RETURNS SETOF jobs.outcome
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    accepted_ids bigint[];
    accepted_items bigint[];
    woken_by bigint[];
    woken bigint[];
BEGIN
    PERFORM jobs.check_worker('jobs.complete_many', worker);
    IF job_ids IS NULL OR lease_versions IS NULL
       OR cardinality(job_ids) <> cardinality(lease_versions)
       OR (results IS NOT NULL AND cardinality(results) <> cardinality(job_ids)) THEN
        RAISE EXCEPTION 'jobs.complete_many: job_ids (%), lease_versions (%) and results (%) must be arrays of the same length',
            coalesce(cardinality(job_ids)::text, 'NULL'), coalesce(cardinality(lease_versions)::text, 'NULL'),
            coalesce(cardinality(results)::text, 'NULL')
            USING ERRCODE = '22023', HINT = 'Item i is (job_ids[i], lease_versions[i], results[i]); results may be NULL for no results.';
    END IF;

    -- Authority predicate inline, per item. A job can be completed once: when an id is
    -- repeated, the first item that holds the current lease is the one applied.
    WITH input AS (
        SELECT i.id, i.lease_version, i.result, i.ord
          FROM unnest(complete_many.job_ids, complete_many.lease_versions,
                      coalesce(complete_many.results, array_fill(NULL::jsonb, ARRAY[cardinality(complete_many.job_ids)])))
               WITH ORDINALITY AS i(id, lease_version, result, ord)
    ), items AS (
        SELECT DISTINCT ON (i.id) i.id, i.lease_version, i.result, i.ord
          FROM input AS i
          LEFT JOIN jobs.job AS cur ON cur.id = i.id
         ORDER BY i.id, (cur.lease_version = i.lease_version) IS TRUE DESC, i.ord
    ), finished AS (
        UPDATE jobs.job AS j
           SET status = 'done', result = it.result, finished_at = now(), updated_at = now(),
               lease_expires_at = NULL
          FROM items AS it
         WHERE j.id = it.id
           AND j.status = 'processing'
           AND j.owned_by = complete_many.worker
           AND j.lease_version = it.lease_version
        RETURNING j.id, j.lease_version, it.ord
    ), logged AS (
        INSERT INTO jobs.event (job_id, at, from_status, to_status, lease_version, worker, reason)
        SELECT f.id, now(), 'processing', 'done', f.lease_version, complete_many.worker, 'completed'
          FROM finished AS f
    )
    SELECT coalesce(array_agg(f.id), '{}'), coalesce(array_agg(f.ord), '{}') INTO accepted_ids, accepted_items
      FROM finished AS f;

    SELECT coalesce(array_agg(w.source_id), '{}'), coalesce(array_agg(w.woken_id), '{}')
      INTO woken_by, woken
      FROM jobs.release_dependents(accepted_ids) AS w;

    RETURN QUERY
    WITH input AS (
        SELECT i.id, i.ord, i.ord = ANY (accepted_items) AS applied
          FROM unnest(complete_many.job_ids) WITH ORDINALITY AS i(id, ord)
    ), wake AS (
        SELECT w.source_id, array_agg(w.woken_id ORDER BY w.woken_id) AS ids
          FROM unnest(woken_by, woken) AS w(source_id, woken_id)
         GROUP BY w.source_id
    )
    SELECT i.id,
           i.applied,
           j.status,
           j.run_after,
           CASE WHEN i.applied THEN coalesce(wk.ids, '{}') ELSE '{}' END
      FROM input AS i
      LEFT JOIN jobs.job AS j ON j.id = i.id
      LEFT JOIN wake AS wk ON wk.source_id = i.id
     ORDER BY i.ord;
END $$;
COMMENT ON FUNCTION jobs.complete_many(bigint[], text, bigint[], jsonb[]) IS
    'Complete many jobs in one round trip. One outcome per item in input order: accepted = false (nothing written) where worker no longer holds that lease_version.';
REVOKE ALL ON FUNCTION jobs.complete_many(bigint[], text, bigint[], jsonb[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jobs.complete_many(bigint[], text, bigint[], jsonb[]) TO jobs_worker, jobs_admin;
COMMIT;
