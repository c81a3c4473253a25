-- Deploy jobfence:reap to pg
-- requires: signal
-- requires: finish_leases
-- requires: end_unheld
BEGIN;
CREATE OR REPLACE FUNCTION jobs.reap(max_jobs integer DEFAULT 1000)
RETURNS SETOF jobs.signal
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
SET enable_seqscan = off
AS $$
DECLARE
    expired_ids bigint[];
    owners text[];
    versions bigint[];
    verdicts jobs.verdict[];
    errors text[];
    n integer;
    requeued jobs.signal[] := '{}';
    woken bigint[] := '{}';
    overspent bigint[];
BEGIN
    IF max_jobs IS NULL OR max_jobs < 1 THEN
        RAISE EXCEPTION 'jobs.reap: max_jobs must be at least 1, got %', coalesce(max_jobs::text, 'NULL')
            USING ERRCODE = '22023', HINT = 'Call again while it keeps returning rows.';
    END IF;

    -- Safe by construction: SKIP LOCKED hands each expired lease to exactly one reaper, the
    -- lease_version bump fences the old owner out, and heartbeats never extend a lease past
    -- claimed_at + timeout, so a hung job is caught even while it keeps heartbeating. The
    -- locks held here make the leases' owners and versions current for finish_leases.
    -- A lease that reached its cap (claimed_at + timeout: heartbeats never extend it further)
    -- is a timeout: a failure, retried after the kind's backoff. One that ended before the
    -- cap lost its heartbeats (a crashed worker): due again at once, for the recovery bound.
    SELECT coalesce(array_agg(e.id ORDER BY e.id), '{}'), coalesce(array_agg(e.owned_by ORDER BY e.id), '{}'),
           coalesce(array_agg(e.lease_version ORDER BY e.id), '{}'),
           coalesce(array_agg(CASE WHEN e.timed_out THEN 'timeout' ELSE 'expired' END::jobs.verdict ORDER BY e.id), '{}'),
           coalesce(array_agg(CASE WHEN e.timed_out THEN format('timeout after %s', e.timeout) ELSE 'lease expired' END
                              ORDER BY e.id), '{}')
      INTO expired_ids, owners, versions, verdicts, errors
      FROM (SELECT j.id, j.owned_by, j.lease_version, j.timeout,
                   j.lease_expires_at >= j.claimed_at + j.timeout AS timed_out
              FROM jobs.job AS j
             WHERE j.status = 'processing' AND j.lease_expires_at <= now()
             ORDER BY j.lease_expires_at, j.id
             LIMIT max_jobs
               FOR UPDATE SKIP LOCKED) AS e;

    IF cardinality(expired_ids) > 0 THEN
        n := cardinality(expired_ids);
        SELECT coalesce(array_agg((o.job_id, j.queue, o.run_after, j.priority)::jobs.signal ORDER BY o.job_id)
                            FILTER (WHERE o.status = 'queued'), '{}'),
               coalesce(array_agg(DISTINCT w.woken_id) FILTER (WHERE w.woken_id IS NOT NULL), '{}')
          INTO requeued, woken
          FROM jobs.finish_leases(expired_ids, owners, versions, verdicts,
                                  array_fill(NULL::jsonb, ARRAY[n]), errors, NULL, 'jobs.reap') AS o
          JOIN jobs.job AS j ON j.id = o.job_id
          LEFT JOIN LATERAL unnest(o.wake) AS w(woken_id) ON true;
    END IF;

    -- Queued jobs whose budget is already spent (retry_count > max_retries, e.g. after a
    -- hand edit) must not run again. The partial index keeps this free when there are none.
    SELECT coalesce(array_agg(s.id ORDER BY s.id), '{}')
      INTO overspent
      FROM (SELECT o.id
              FROM jobs.job AS o
             WHERE o.status IN ('queued', 'enqueue_failed') AND o.retry_count > o.max_retries
             ORDER BY o.id
             LIMIT max_jobs
               FOR UPDATE SKIP LOCKED) AS s;
    IF cardinality(overspent) > 0 THEN
        woken := woken || jobs.end_unheld(overspent, 'exhausted',
                                     array_fill('retry budget exhausted'::text, ARRAY[cardinality(overspent)]));
    END IF;

    RETURN QUERY SELECT * FROM unnest(requeued);
    -- Jobs that became claimable because a reaped job ended (fan-in coordinator, next of an ordering key).
    RETURN QUERY
    SELECT DISTINCT j.id, j.queue, j.run_after, j.priority
      FROM jobs.job AS j
     WHERE j.id = ANY (woken);
END $$;
COMMENT ON FUNCTION jobs.reap(integer) IS
    'Recover up to max_jobs expired leases while the retry budget lasts, else failed: a lease whose heartbeats stopped is queued again at once (reason reaped, error ''lease expired''); one that reached its execution timeout (claimed_at + timeout) after the kind''s backoff (reason timed_out, error ''timeout after ...''). Returns the jobs to push: requeued ones and ones woken by jobs it failed.';
REVOKE ALL ON FUNCTION jobs.reap(integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jobs.reap(integer) TO jobs_admin;
COMMIT;
