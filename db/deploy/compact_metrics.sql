-- Deploy jobfence:compact_metrics to pg
-- requires: metric_minute
-- requires: histogram_add
BEGIN;
-- Shards exist so that concurrent batches do not queue on one counter row; once a minute is
-- over nobody needs them. The reaper folds each closed minute's shards into shard 0 at every
-- tick, so jobs.metrics reads one row per minute and kind instead of four. Idempotent and
-- safe beside writers: a late write (a transaction that began in that minute) only adds a
-- shard row again, folded at the next call.
CREATE OR REPLACE FUNCTION jobs.compact_metrics(max_rows integer DEFAULT 10000)
RETURNS integer
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
DECLARE
    folded integer;
BEGIN
    IF max_rows IS NULL OR max_rows < 1 THEN
        RAISE EXCEPTION 'jobs.compact_metrics: max_rows must be at least 1, got %', coalesce(max_rows::text, 'NULL')
            USING ERRCODE = '22023', HINT = 'Call again while it keeps returning max_rows.';
    END IF;
    WITH gone AS (
        DELETE FROM jobs.metric_minute AS m
         USING (SELECT o.minute, o.kind, o.shard
                  FROM jobs.metric_minute AS o
                 WHERE o.minute < date_trunc('minute', now()) - interval '1 minute'
                   AND o.shard <> 0
                 ORDER BY o.minute, o.kind, o.shard
                 LIMIT max_rows
                   FOR UPDATE SKIP LOCKED) AS v
         WHERE m.minute = v.minute AND m.kind = v.kind AND m.shard = v.shard
        RETURNING m.*
    ), hists AS (
        SELECT h.minute, h.kind, h.which, array_agg(h.n ORDER BY h.k) AS hist
          FROM (SELECT g.minute, g.kind, x.which, b.k, sum(b.n)::integer AS n
                  FROM gone AS g
                 CROSS JOIN LATERAL (VALUES (1, g.wait_hist), (2, g.run_hist), (3, g.latency_hist)) AS x(which, hist)
                 CROSS JOIN LATERAL unnest(x.hist) WITH ORDINALITY AS b(n, k)
                 GROUP BY 1, 2, 3, 4) AS h
         GROUP BY 1, 2, 3
    ), sums AS (
        SELECT g.minute, g.kind,
               sum(g.submitted) AS submitted, sum(g.started) AS started, sum(g.succeeded) AS succeeded,
               sum(g.failed) AS failed, sum(g.retried) AS retried, sum(g.reaped) AS reaped,
               sum(g.cancelled) AS cancelled, sum(g.dead_lettered) AS dead_lettered, sum(g.slo_met) AS slo_met,
               ARRAY[sum(g.ended_after[1]), sum(g.ended_after[2]), sum(g.ended_after[3]), sum(g.ended_after[4])]::bigint[] AS ended_after
          FROM gone AS g
         GROUP BY 1, 2
    ), kept AS (
        INSERT INTO jobs.metric_minute AS m (minute, kind, shard, submitted, started, succeeded, failed, retried,
                                             reaped, cancelled, dead_lettered, slo_met, ended_after,
                                             wait_hist, run_hist, latency_hist)
        SELECT s.minute, s.kind, 0, s.submitted, s.started, s.succeeded, s.failed, s.retried, s.reaped,
               s.cancelled, s.dead_lettered, s.slo_met, s.ended_after, hw.hist, hr.hist, hl.hist
          FROM sums AS s
          LEFT JOIN hists AS hw ON hw.minute = s.minute AND hw.kind = s.kind AND hw.which = 1
          LEFT JOIN hists AS hr ON hr.minute = s.minute AND hr.kind = s.kind AND hr.which = 2
          LEFT JOIN hists AS hl ON hl.minute = s.minute AND hl.kind = s.kind AND hl.which = 3
         ORDER BY s.minute, s.kind
        ON CONFLICT (minute, kind, shard) DO UPDATE
           SET submitted = m.submitted + excluded.submitted,
               started = m.started + excluded.started,
               succeeded = m.succeeded + excluded.succeeded,
               failed = m.failed + excluded.failed,
               retried = m.retried + excluded.retried,
               reaped = m.reaped + excluded.reaped,
               cancelled = m.cancelled + excluded.cancelled,
               dead_lettered = m.dead_lettered + excluded.dead_lettered,
               slo_met = m.slo_met + excluded.slo_met,
               ended_after = ARRAY[m.ended_after[1] + excluded.ended_after[1], m.ended_after[2] + excluded.ended_after[2],
                                   m.ended_after[3] + excluded.ended_after[3], m.ended_after[4] + excluded.ended_after[4]],
               wait_hist = jobs.histogram_add(m.wait_hist, excluded.wait_hist),
               run_hist = jobs.histogram_add(m.run_hist, excluded.run_hist),
               latency_hist = jobs.histogram_add(m.latency_hist, excluded.latency_hist)
    )
    SELECT count(*) INTO folded FROM gone;
    RETURN folded;
END $$;
COMMENT ON FUNCTION jobs.compact_metrics(integer) IS
    'Fold the shards of closed rollup minutes (older than the previous minute) into shard 0, up to max_rows shard rows; returns the rows folded. Called by the reaper. Granted to jobs_admin.';
REVOKE ALL ON FUNCTION jobs.compact_metrics(integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jobs.compact_metrics(integer) TO jobs_admin;
COMMIT;
