-- Deploy jobfence:queue_depth to pg
-- requires: job
-- requires: job_type
BEGIN;
-- Backlog by cause, per queue and kind (docs/observability.md). Each status is read through
-- its own partial index, so millions of terminal rows are never visited; the unfinished ones
-- are counted per (queue, kind, state) first and only then spread into columns, which on a
-- million-job backlog is twice as fast as a dozen filtered counters per row.
-- A function (JIT off: on a big backlog the planner's estimate would otherwise buy half a
-- second of compiling) behind a view (so any SQL client can filter and join it).
CREATE OR REPLACE FUNCTION jobs.queue_depth_counts()
RETURNS TABLE (queue text, kind text, queued_ready bigint, queued_delayed bigint, queued_blocked bigint,
               processing bigint, processing_expired bigint, enqueue_failed bigint,
               oldest_ready_age double precision)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
BEGIN
    RETURN QUERY
    WITH unfinished AS (
        SELECT q.queue, q.kind,
               CASE WHEN q.run_after > now() THEN 1                       -- delayed
                    -- jobs.claimable's ordering rule, spelt out so it reads each row once
                    -- (a pgTAP test holds the two to the same answer).
                    WHEN q.pending_children > 0 OR (q.ordering_key IS NOT NULL AND (
                             EXISTS (SELECT 1 FROM jobs.job AS older
                                      WHERE older.ordering_key = q.ordering_key
                                        AND older.id < q.id
                                        AND older.status IN ('queued', 'processing', 'enqueue_failed'))
                             OR EXISTS (SELECT 1 FROM jobs.job AS running
                                         WHERE running.ordering_key = q.ordering_key
                                           AND running.status = 'processing'
                                           AND running.id > q.id))) THEN 2  -- blocked
                    ELSE 0 END AS state,                                  -- ready
               q.run_after
          FROM jobs.job AS q
         WHERE q.status = 'queued'
        UNION ALL
        SELECT p.queue, p.kind, CASE WHEN p.lease_expires_at < now() THEN 4 ELSE 3 END, NULL
          FROM jobs.job AS p
         WHERE p.status = 'processing'
        UNION ALL
        SELECT e.queue, e.kind, 5, NULL
          FROM jobs.job AS e
         WHERE e.status = 'enqueue_failed'
    ), by_state AS (
        SELECT u.queue, u.kind, u.state, count(*) AS n, min(u.run_after) AS oldest_due
          FROM unfinished AS u
         GROUP BY 1, 2, 3
    ), counted AS (
        SELECT b.queue, b.kind,
               coalesce(sum(b.n) FILTER (WHERE b.state = 0), 0)::bigint AS ready,
               coalesce(sum(b.n) FILTER (WHERE b.state = 1), 0)::bigint AS delayed,
               coalesce(sum(b.n) FILTER (WHERE b.state = 2), 0)::bigint AS blocked,
               coalesce(sum(b.n) FILTER (WHERE b.state IN (3, 4)), 0)::bigint AS leased,
               coalesce(sum(b.n) FILTER (WHERE b.state = 4), 0)::bigint AS expired,
               coalesce(sum(b.n) FILTER (WHERE b.state = 5), 0)::bigint AS unsignalled,
               date_part('epoch', now() - min(b.oldest_due) FILTER (WHERE b.state = 0)) AS oldest
          FROM by_state AS b
         GROUP BY 1, 2
    )
    SELECT coalesce(c.queue, t.queue), coalesce(c.kind, t.kind),
           coalesce(c.ready, 0), coalesce(c.delayed, 0), coalesce(c.blocked, 0),
           coalesce(c.leased, 0), coalesce(c.expired, 0), coalesce(c.unsignalled, 0), c.oldest
      FROM counted AS c
      FULL JOIN jobs.job_type AS t ON t.kind = c.kind AND t.queue = c.queue;
END $$;
COMMENT ON FUNCTION jobs.queue_depth_counts() IS
    'The rows of the view jobs.queue_depth: per queue and kind, queued_ready, queued_delayed, queued_blocked (the backlog), processing, processing_expired, enqueue_failed, oldest_ready_age (seconds). Granted to jobs_admin.';
REVOKE ALL ON FUNCTION jobs.queue_depth_counts() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jobs.queue_depth_counts() TO jobs_admin;

CREATE VIEW jobs.queue_depth AS SELECT * FROM jobs.queue_depth_counts();
COMMENT ON VIEW jobs.queue_depth IS
    'Per queue and kind: queued_ready, queued_delayed, queued_blocked (the backlog), processing, processing_expired, enqueue_failed, oldest_ready_age (seconds). Granted to jobs_admin.';
REVOKE ALL ON jobs.queue_depth FROM PUBLIC;
GRANT SELECT ON jobs.queue_depth TO jobs_admin;
COMMIT;
