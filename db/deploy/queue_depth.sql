-- Deploy jobfence:queue_depth to pg
-- requires: job
-- requires: job_type
BEGIN;
-- Backlog by cause, per queue and kind (docs/observability.md). Each status is read through
-- its own partial index, so millions of terminal rows are never visited. A view, not a
-- function, so any SQL client can filter and join it; it reads the tables with its owner's
-- rights, and jobs_admin gets SELECT on it alone.
CREATE VIEW jobs.queue_depth AS
WITH unfinished AS (
    SELECT q.queue, q.kind,
           CASE WHEN q.run_after > now() THEN 'delayed'
                WHEN q.pending_children > 0 OR (q.ordering_key IS NOT NULL AND EXISTS (
                         SELECT 1 FROM jobs.job AS older
                          WHERE older.ordering_key = q.ordering_key
                            AND older.id < q.id
                            AND older.status IN ('queued', 'processing', 'enqueue_failed'))) THEN 'blocked'
                ELSE 'ready' END AS state,
           q.run_after
      FROM jobs.job AS q
     WHERE q.status = 'queued'
    UNION ALL
    SELECT p.queue, p.kind, CASE WHEN p.lease_expires_at < now() THEN 'expired' ELSE 'processing' END, NULL
      FROM jobs.job AS p
     WHERE p.status = 'processing'
    UNION ALL
    SELECT e.queue, e.kind, 'enqueue_failed', NULL
      FROM jobs.job AS e
     WHERE e.status = 'enqueue_failed'
), counted AS (
    SELECT u.queue, u.kind,
           count(*) FILTER (WHERE u.state = 'ready') AS queued_ready,
           count(*) FILTER (WHERE u.state = 'delayed') AS queued_delayed,
           count(*) FILTER (WHERE u.state = 'blocked') AS queued_blocked,
           count(*) FILTER (WHERE u.state IN ('processing', 'expired')) AS processing,
           count(*) FILTER (WHERE u.state = 'expired') AS processing_expired,
           count(*) FILTER (WHERE u.state = 'enqueue_failed') AS enqueue_failed,
           date_part('epoch', now() - min(u.run_after) FILTER (WHERE u.state = 'ready')) AS oldest_ready_age
      FROM unfinished AS u
     GROUP BY u.queue, u.kind
)
SELECT coalesce(c.queue, t.queue) AS queue, coalesce(c.kind, t.kind) AS kind,
       coalesce(c.queued_ready, 0) AS queued_ready, coalesce(c.queued_delayed, 0) AS queued_delayed,
       coalesce(c.queued_blocked, 0) AS queued_blocked, coalesce(c.processing, 0) AS processing,
       coalesce(c.processing_expired, 0) AS processing_expired,
       coalesce(c.enqueue_failed, 0) AS enqueue_failed, c.oldest_ready_age
  FROM counted AS c
  FULL JOIN jobs.job_type AS t ON t.kind = c.kind AND t.queue = c.queue;
COMMENT ON VIEW jobs.queue_depth IS
    'Per queue and kind: queued_ready, queued_delayed, queued_blocked (the backlog), processing, processing_expired, enqueue_failed, oldest_ready_age (seconds). Granted to jobs_admin.';
REVOKE ALL ON jobs.queue_depth FROM PUBLIC;
GRANT SELECT ON jobs.queue_depth TO jobs_admin;
COMMIT;
