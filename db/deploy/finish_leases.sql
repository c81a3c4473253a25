-- Deploy jobfence:finish_leases to pg
-- requires: outcome
-- requires: event
-- requires: backoff_delay
-- requires: release_dependents
-- requires: tally
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
SET enable_seqscan = off
SET enable_nestloop = off
AS $$
DECLARE
    ended_ids bigint[] := '{}';
    applied_ords bigint[] := '{}';
    applied jobs.outcome[] := '{}';
    woken_by bigint[] := '{}';
    woken bigint[] := '{}';
    n integer := cardinality(job_ids);
    pending bigint[];          -- NULL: every item (the first round)
    round_ended bigint[];
    round_ords bigint[];
    round_outcomes jobs.outcome[];
    decided_count integer;
    tallied integer;
    rounds integer := 0;
BEGIN
    -- No explicit row locks: the UPDATE itself waits for a concurrent writer and then
    -- re-checks its WHERE on the newest row version. A row whose facts changed meanwhile (a
    -- cancel request, a reaper's requeue) is left alone by this round and decided again in
    -- the next one, from what it says then. Usually there is one round.
    LOOP
        rounds := rounds + 1;
        WITH input AS (
            SELECT i.id, i.worker, i.lease_version, i.verdict, i.result, i.error, i.ord
              FROM unnest(finish_leases.job_ids, finish_leases.workers, finish_leases.lease_versions,
                          finish_leases.verdicts, finish_leases.results, finish_leases.errors)
                   WITH ORDINALITY AS i(id, worker, lease_version, verdict, result, error, ord)
             WHERE pending IS NULL OR i.ord = ANY (pending)
        ), decided AS (
            -- The authority predicate, and the next-state rule (reliability contract §4;
            -- docs/sql-api.md "Leaving processing") on what the row says now. A repeated id
            -- that holds the lease more than once is applied once (its first item). In id
            -- order, so concurrent batches update rows in the same order: no deadlock.
            SELECT DISTINCT ON (i.id) i.id, i.worker, i.lease_version, i.verdict, i.result, i.error, i.ord,
                   cur.retry_count, cur.max_retries, cur.cancel_requested_at IS NOT NULL AS cancel_asked,
                   cur.claimed_at,
                   CASE WHEN i.verdict = 'done' THEN 'done'::jobs.status
                        WHEN cur.cancel_requested_at IS NOT NULL OR i.verdict = 'fatal'
                          OR cur.retry_count + 1 > cur.max_retries THEN 'failed'::jobs.status
                        ELSE 'queued'::jobs.status END AS next_status,
                   CASE WHEN i.verdict = 'done' THEN 'completed'
                        WHEN cur.cancel_requested_at IS NOT NULL THEN 'cancelled'
                        WHEN i.verdict = 'fatal' THEN 'failed'
                        WHEN cur.retry_count + 1 > cur.max_retries THEN 'exhausted'
                        WHEN i.verdict = 'expired' THEN 'reaped'
                        ELSE 'retried' END AS reason
              FROM input AS i
              -- One primary-key lookup per item, whatever the statistics say: LATERAL with
              -- LIMIT keeps the items outside (a join could be turned round into a scan of
              -- the table, or of a partial index, per item), and IS NOT DISTINCT FROM does
              -- not prove a partial index's predicate (see jobs.claimable).
             CROSS JOIN LATERAL (
                   SELECT j.retry_count, j.max_retries, j.cancel_requested_at, j.claimed_at
                     FROM jobs.job AS j
                    WHERE j.id = i.id
                      AND j.status IS NOT DISTINCT FROM 'processing'
                      AND j.owned_by = i.worker
                      AND j.lease_version = i.lease_version
                    LIMIT 1) AS cur
             ORDER BY i.id, i.ord
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
                   -- A reaped job is due at once; a failed attempt waits for its kind's backoff
                   -- (looked up only then: completions, the common case, never need it).
                   run_after = CASE WHEN d.next_status <> 'queued' THEN j.run_after
                                    WHEN d.verdict = 'expired' THEN now()
                                    ELSE now() + (SELECT jobs.backoff_delay(j.retry_count + 1, t.backoff_base, t.backoff_max)
                                                    FROM jobs.job_type AS t WHERE t.kind = j.kind) END,
                   finished_at = CASE WHEN d.next_status = 'queued' THEN NULL ELSE now() END,
                   updated_at = now()
              FROM decided AS d
             -- Found through the primary key (id = ANY), joined by hash: the same plan on an
             -- empty table as on a full one (docs/decisions.md, "planned the same on any table").
             WHERE j.id = d.id
               AND j.id = ANY (finish_leases.job_ids)
               -- Re-checked on the newest version after a lock wait: the lease is still held...
               AND j.status IS NOT DISTINCT FROM 'processing'
               AND j.owned_by = d.worker
               AND j.lease_version = d.lease_version
               -- ...and the facts the next state was decided on still hold.
               AND j.retry_count = d.retry_count
               AND j.max_retries = d.max_retries
               AND (j.cancel_requested_at IS NOT NULL) = d.cancel_asked
            RETURNING j.id, j.status, j.run_after, j.lease_version, j.parent_id, j.ordering_key,
                      d.worker, d.reason, d.verdict, d.error, d.ord,
                      j.kind, j.due_at, d.claimed_at, d.retry_count
        ), logged AS (
            INSERT INTO jobs.event (job_id, at, from_status, to_status, lease_version, worker, reason, error)
            SELECT f.id, now(), 'processing', f.status, f.lease_version, f.worker, f.reason,
                   CASE WHEN f.verdict <> 'done' THEN f.error END
              FROM finished AS f
        )
        SELECT coalesce(array_agg(f.id) FILTER (WHERE f.status <> 'queued'
                                                  AND (f.parent_id IS NOT NULL OR f.ordering_key IS NOT NULL)), '{}'),
               coalesce(array_agg(f.ord ORDER BY f.ord), '{}'),
               coalesce(array_agg((f.id, true, f.status, f.run_after, '{}')::jobs.outcome ORDER BY f.ord), '{}'),
               (SELECT count(*) FROM decided),
               jobs.tally(array_agg(f.kind), array_agg(f.reason), array_agg(f.verdict = 'expired'), NULL,
                          array_agg(date_part('epoch', now() - f.claimed_at)),
                          array_agg(CASE WHEN f.status <> 'queued' THEN date_part('epoch', now() - f.due_at) END),
                          array_agg(f.retry_count), array_agg(f.id))
          INTO round_ended, round_ords, round_outcomes, decided_count, tallied
          FROM finished AS f;

        ended_ids := ended_ids || round_ended;
        applied_ords := applied_ords || round_ords;
        applied := applied || round_outcomes;
        -- Every item that held its lease was applied: nothing is left to decide again.
        EXIT WHEN cardinality(round_ords) = decided_count OR rounds >= 10;
        pending := ARRAY(SELECT o FROM generate_series(1, n) AS o WHERE NOT (o = ANY (applied_ords)));
    END LOOP;

    -- Only a job with a coordinator or an ordering key can have kept another one waiting.
    IF cardinality(ended_ids) > 0 THEN
        SELECT coalesce(array_agg(w.source_id), '{}'), coalesce(array_agg(w.woken_id), '{}')
          INTO woken_by, woken
          FROM jobs.release_dependents(ended_ids) AS w;
    END IF;

    IF cardinality(applied_ords) = n AND rounds = 1 AND cardinality(woken) = 0 THEN
        -- Every item applied, nothing woken (the common case): the outcomes are known.
        RETURN QUERY SELECT * FROM unnest(applied);
        RETURN;
    END IF;

    RETURN QUERY
    WITH input AS (
        SELECT i.id, i.ord, i.ord = ANY (applied_ords) AS applied
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
