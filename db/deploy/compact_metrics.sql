-- Deploy jobfence:compact_metrics to pg
-- requires: metric_minute
-- requires: merge_metrics
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
-- The CTEs it joins have no indexes: a nested loop over them is quadratic in the rows folded;
-- and a month of minutes must be read through the primary key, not scanned per call.
SET enable_seqscan = off
SET enable_nestloop = off
AS $$
DECLARE
    folded integer;
    merged integer;
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
        -- One row per minute and kind with its three added histograms (see jobs.metrics).
        SELECT x.minute, x.kind, array_agg(coalesce(x.w, 0)::integer ORDER BY x.k) AS wait_hist,
               array_agg(coalesce(x.r, 0)::integer ORDER BY x.k) AS run_hist,
               array_agg(coalesce(x.l, 0)::integer ORDER BY x.k) AS latency_hist,
               bool_or(x.has_w) AS has_w, bool_or(x.has_r) AS has_r, bool_or(x.has_l) AS has_l
          FROM (SELECT g.minute, g.kind, b.k,
                       sum(g.wait_hist[b.k]) AS w, sum(g.run_hist[b.k]) AS r, sum(g.latency_hist[b.k]) AS l,
                       bool_or(g.wait_hist IS NOT NULL) AS has_w, bool_or(g.run_hist IS NOT NULL) AS has_r,
                       bool_or(g.latency_hist IS NOT NULL) AS has_l
                  FROM gone AS g
                 CROSS JOIN generate_series(1, 92) AS b(k)
                 GROUP BY 1, 2, 3) AS x
         GROUP BY 1, 2
    ), sums AS (
        SELECT g.minute, g.kind,
               sum(g.submitted) AS submitted, sum(g.started) AS started, sum(g.succeeded) AS succeeded,
               sum(g.failed) AS failed, sum(g.retried) AS retried, sum(g.reaped) AS reaped,
               sum(g.cancelled) AS cancelled, sum(g.dead_lettered) AS dead_lettered, sum(g.slo_met) AS slo_met,
               ARRAY[sum(g.ended_after[1]), sum(g.ended_after[2]), sum(g.ended_after[3]), sum(g.ended_after[4])]::bigint[] AS ended_after
          FROM gone AS g
         GROUP BY 1, 2
    )
    SELECT (SELECT count(*) FROM gone),
           jobs.merge_metrics(ARRAY(
               SELECT ROW(s.minute, s.kind, 0, s.submitted, s.started, s.succeeded, s.failed, s.retried, s.reaped,
                          s.cancelled, s.dead_lettered, s.slo_met, s.ended_after,
                          -- NULL stays NULL: "no sample this minute" is not a histogram of zeros.
                          CASE WHEN h.has_w THEN h.wait_hist END, CASE WHEN h.has_r THEN h.run_hist END,
                          CASE WHEN h.has_l THEN h.latency_hist END)::jobs.metric_minute
                 FROM sums AS s
                 JOIN hists AS h ON h.minute = s.minute AND h.kind = s.kind))
      INTO folded, merged;
    RETURN folded;
END $$;
COMMENT ON FUNCTION jobs.compact_metrics(integer) IS
    'Fold the shards of closed rollup minutes (older than the previous minute) into shard 0, up to max_rows shard rows; returns the rows folded. Called by the reaper. Granted to jobs_admin.';
REVOKE ALL ON FUNCTION jobs.compact_metrics(integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jobs.compact_metrics(integer) TO jobs_admin;
COMMIT;
