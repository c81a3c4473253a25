-- Deploy jobfence:finish_leases to pg
-- requires: outcome
-- requires: event
-- requires: backoff_delay
-- requires: release_dependents
BEGIN;
-- The one exit from processing, the mirror of grant_leases. complete, complete_many, fail,
-- fail_many and reap are thin callers: this function alone owns the authority predicate,
-- the next-state rule, the SET list, the event rows and the wake-ups (docs/sql-api.md,
-- "Leaving processing"). Item i is (job_ids[i], workers[i], lease_versions[i], verdicts[i],
-- results[i], errors[i]); verdicts: 'done' (a result), 'retry' (a failure that may be
-- retried), 'fatal' (a failure no retry can fix), 'expired' (the reaper took the lease).
-- Returns one outcome per item, in input order; accepted = false (nothing written) where
-- the worker no longer holds that lease_version. A repeated id is applied once: the first
-- item that holds the current lease.
CREATE OR REPLACE FUNCTION jobs.finish_leases(job_ids bigint[], workers text[], lease_versions bigint[],
                                              verdicts text[], results jsonb[], errors text[])
RETURNS SETOF jobs.outcome
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    ended_ids bigint[];
    accepted_items bigint[];
    woken_by bigint[];
    woken bigint[];
BEGIN
    WITH input AS (
        SELECT i.id, i.worker, i.lease_version, i.verdict, i.result, i.error, i.ord
          FROM unnest(finish_leases.job_ids, finish_leases.workers, finish_leases.lease_versions,
                      finish_leases.verdicts, finish_leases.results, finish_leases.errors)
               WITH ORDINALITY AS i(id, worker, lease_version, verdict, result, error, ord)
    ), candidate AS (
        SELECT DISTINCT ON (i.id) i.*
          FROM input AS i
          JOIN jobs.job AS cur ON cur.id = i.id
         ORDER BY i.id, (cur.lease_version = i.lease_version AND cur.owned_by = i.worker) DESC, i.ord
    ), held AS (
        -- The authority predicate. FOR UPDATE re-checks it on the newest row version after
        -- waiting for a lock, and locks in id order so concurrent batches cannot deadlock.
        SELECT c.id, c.worker, c.verdict, c.result, c.error, c.ord,
               j.retry_count, j.max_retries, j.cancel_requested_at, j.kind
          FROM candidate AS c
          JOIN jobs.job AS j ON j.id = c.id
         WHERE j.status = 'processing'
           AND j.owned_by = c.worker
           AND j.lease_version = c.lease_version
         ORDER BY j.id
           FOR UPDATE OF j
    ), decided AS (
        -- The next-state rule (reliability contract §4, DESIGN §2).
        SELECT h.*, d.next_status, d.reason,
               CASE WHEN d.next_status <> 'queued' THEN NULL
                    WHEN h.verdict = 'expired' THEN interval '0'
                    ELSE jobs.backoff_delay(h.retry_count + 1, t.backoff_base, t.backoff_max) END AS delay
          FROM held AS h
          JOIN jobs.job_type AS t ON t.kind = h.kind
         CROSS JOIN LATERAL (
               SELECT CASE WHEN h.verdict = 'done' THEN 'done'::jobs.status
                           WHEN h.cancel_requested_at IS NOT NULL OR h.verdict = 'fatal'
                             OR h.retry_count + 1 > h.max_retries THEN 'failed'::jobs.status
                           ELSE 'queued'::jobs.status END AS next_status,
                      CASE WHEN h.verdict = 'done' THEN 'completed'
                           WHEN h.cancel_requested_at IS NOT NULL THEN 'cancelled'
                           WHEN h.verdict = 'fatal' THEN 'failed'
                           WHEN h.retry_count + 1 > h.max_retries THEN 'exhausted'
                           WHEN h.verdict = 'expired' THEN 'reaped'
                           ELSE 'retried' END AS reason) AS d
    ), finished AS (
        UPDATE jobs.job AS j
           SET status = d.next_status,
               result = CASE WHEN d.verdict = 'done' THEN d.result END,
               error = CASE WHEN d.verdict = 'done' THEN j.error ELSE d.error END,
               retry_count = j.retry_count + CASE WHEN d.verdict = 'done' THEN 0 ELSE 1 END,
               -- done keeps who finished it and when it started; failed and requeued clear them.
               owned_by = CASE WHEN d.verdict = 'done' THEN j.owned_by END,
               claimed_at = CASE WHEN d.verdict = 'done' THEN j.claimed_at END,
               lease_expires_at = NULL,
               lease_version = j.lease_version + CASE WHEN d.next_status = 'queued' THEN 1 ELSE 0 END,
               run_after = CASE WHEN d.next_status = 'queued' THEN now() + d.delay ELSE j.run_after END,
               finished_at = CASE WHEN d.next_status = 'queued' THEN NULL ELSE now() END,
               updated_at = now()
          FROM decided AS d
         WHERE j.id = d.id
        RETURNING j.id, j.status, j.lease_version, d.worker, d.reason, d.verdict, d.error, d.ord
    ), logged AS (
        INSERT INTO jobs.event (job_id, at, from_status, to_status, lease_version, worker, reason, error)
        SELECT f.id, now(), 'processing', f.status, f.lease_version, f.worker, f.reason,
               CASE WHEN f.verdict <> 'done' THEN f.error END
          FROM finished AS f
    )
    SELECT coalesce(array_agg(f.id) FILTER (WHERE f.status <> 'queued'), '{}'),
           coalesce(array_agg(f.ord), '{}')
      INTO ended_ids, accepted_items
      FROM finished AS f;

    IF cardinality(ended_ids) > 0 THEN
        SELECT coalesce(array_agg(w.source_id), '{}'), coalesce(array_agg(w.woken_id), '{}')
          INTO woken_by, woken
          FROM jobs.release_dependents(ended_ids) AS w;
    END IF;

    RETURN QUERY
    WITH input AS (
        SELECT i.id, i.ord, i.ord = ANY (accepted_items) AS applied
          FROM unnest(finish_leases.job_ids) WITH ORDINALITY AS i(id, ord)
    ), wake AS (
        SELECT w.source_id, array_agg(w.woken_id ORDER BY w.woken_id) AS ids
          FROM unnest(woken_by, woken) AS w(source_id, woken_id)
         GROUP BY w.source_id
    )
    SELECT i.id, i.applied, j.status, j.run_after,
           CASE WHEN i.applied THEN coalesce(wk.ids, '{}') ELSE '{}' END
      FROM input AS i
      LEFT JOIN jobs.job AS j ON j.id = i.id
      LEFT JOIN wake AS wk ON wk.source_id = i.id
     ORDER BY i.ord;
END $$;
COMMENT ON FUNCTION jobs.finish_leases(bigint[], text[], bigint[], text[], jsonb[], text[]) IS
    'Internal: the one exit from processing (done, retry with backoff, exhausted, failed, cancelled, reaped) for items whose worker still holds the lease; one outcome per item. Not granted to any role.';
REVOKE ALL ON FUNCTION jobs.finish_leases(bigint[], text[], bigint[], text[], jsonb[], text[]) FROM PUBLIC;
COMMIT;
