-- Deploy jobfence:metrics to pg
-- requires: metric_minute
-- requires: histogram_quantile
-- requires: job_type
BEGIN;
-- Per-kind SLIs over a window, read from the rollup that jobs.tally keeps (docs/
-- observability.md): at most minutes x kinds x 4 rows, whatever the size of the history.
CREATE OR REPLACE FUNCTION jobs.metrics(since interval DEFAULT '1 hour')
RETURNS TABLE (kind text, queue text, window_start timestamptz, window_seconds double precision,
               submitted bigint, started bigint, succeeded bigint, failed bigint, retried bigint,
               reaped bigint, cancelled bigint, dead_lettered bigint,
               ended_after_0 bigint, ended_after_1 bigint, ended_after_2 bigint, ended_after_3_plus bigint,
               wait_p50 double precision, wait_p95 double precision, wait_p99 double precision,
               run_p50 double precision, run_p95 double precision, run_p99 double precision,
               latency_p50 double precision, latency_p95 double precision, latency_p99 double precision,
               slo_latency double precision, slo_target numeric, slo_met bigint,
               slo_attainment double precision, error_budget_remaining double precision,
               success_rate double precision, slo_success_target numeric,
               dead_letter_rate double precision, failure_rate double precision,
               max_backlog bigint, run_time_budget double precision, max_failure_rate numeric)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
DECLARE
    start_at timestamptz;
BEGIN
    IF since IS NULL OR since <= interval '0' OR since > interval '400 days' THEN
        RAISE EXCEPTION 'jobs.metrics: since must be a positive interval of at most 400 days, got %',
                        coalesce(since::text, 'NULL')
            USING ERRCODE = '22023', HINT = 'E.g. ''5 minutes'' or ''1 hour''.';
    END IF;
    -- Whole minutes: the rollup's grain.
    start_at := date_trunc('minute', now() - since);

    RETURN QUERY
    WITH rows AS (
        SELECT m.* FROM jobs.metric_minute AS m WHERE m.minute >= start_at
    ), sums AS (
        SELECT r.kind, sum(r.submitted)::bigint AS submitted, sum(r.started)::bigint AS started,
               sum(r.succeeded)::bigint AS succeeded, sum(r.failed)::bigint AS failed,
               sum(r.retried)::bigint AS retried, sum(r.reaped)::bigint AS reaped,
               sum(r.cancelled)::bigint AS cancelled, sum(r.dead_lettered)::bigint AS dead_lettered,
               sum(r.slo_met)::bigint AS slo_met,
               sum(r.ended_after[1])::bigint AS e0, sum(r.ended_after[2])::bigint AS e1,
               sum(r.ended_after[3])::bigint AS e2, sum(r.ended_after[4])::bigint AS e3
          FROM rows AS r
         GROUP BY r.kind
    ), buckets AS (
        -- Histograms of every minute and shard, added bucket by bucket: one row per kind and
        -- bucket carrying all three sums (a third of the rows an unnest per histogram makes).
        SELECT r.kind COLLATE "C" AS kind, b.k,
               sum(r.wait_hist[b.k]) AS w, sum(r.run_hist[b.k]) AS r, sum(r.latency_hist[b.k]) AS l
          FROM rows AS r
         CROSS JOIN generate_series(1, 92) AS b(k)
         GROUP BY 1, 2
    ), hists AS (
        SELECT x.kind, array_agg(coalesce(x.w, 0) ORDER BY x.k) AS wait_hist,
               array_agg(coalesce(x.r, 0) ORDER BY x.k) AS run_hist,
               array_agg(coalesce(x.l, 0) ORDER BY x.k) AS latency_hist
          FROM buckets AS x
         GROUP BY x.kind
    ), kinds AS (
        SELECT t.kind FROM jobs.job_type AS t
        UNION
        SELECT s.kind FROM sums AS s
    )
    SELECT k.kind, t.queue, start_at, date_part('epoch', now() - start_at),
           coalesce(s.submitted, 0), coalesce(s.started, 0), coalesce(s.succeeded, 0),
           coalesce(s.failed, 0), coalesce(s.retried, 0), coalesce(s.reaped, 0),
           coalesce(s.cancelled, 0), coalesce(s.dead_lettered, 0),
           coalesce(s.e0, 0), coalesce(s.e1, 0), coalesce(s.e2, 0), coalesce(s.e3, 0),
           jobs.histogram_quantile(h.wait_hist, 0.50), jobs.histogram_quantile(h.wait_hist, 0.95),
           jobs.histogram_quantile(h.wait_hist, 0.99),
           jobs.histogram_quantile(h.run_hist, 0.50), jobs.histogram_quantile(h.run_hist, 0.95),
           jobs.histogram_quantile(h.run_hist, 0.99),
           jobs.histogram_quantile(h.latency_hist, 0.50), jobs.histogram_quantile(h.latency_hist, 0.95),
           jobs.histogram_quantile(h.latency_hist, 0.99),
           date_part('epoch', t.slo_latency), t.slo_target, coalesce(s.slo_met, 0),
           s.slo_met::double precision / nullif(s.e0 + s.e1 + s.e2 + s.e3, 0),
           -- 1 - (share that missed) / (share allowed to miss); a target of 1 allows none.
           CASE WHEN s.e0 + s.e1 + s.e2 + s.e3 > 0 AND t.slo_target < 1 THEN
                1 - (1 - s.slo_met::double precision / (s.e0 + s.e1 + s.e2 + s.e3)) / (1 - t.slo_target::double precision)
           END,
           s.succeeded::double precision / nullif(s.succeeded + s.dead_lettered, 0), t.slo_success,
           s.dead_lettered::double precision / nullif(s.succeeded + s.dead_lettered, 0),
           s.failed::double precision / nullif(s.succeeded + s.failed, 0),
           t.max_backlog, date_part('epoch', coalesce(t.run_time_budget, t.timeout / 2)), t.max_failure_rate
      FROM kinds AS k
      LEFT JOIN jobs.job_type AS t ON t.kind = k.kind
      LEFT JOIN sums AS s ON s.kind = k.kind
      LEFT JOIN hists AS h ON h.kind = k.kind
     ORDER BY k.kind;
END $$;
COMMENT ON FUNCTION jobs.metrics(interval) IS
    'Per-kind SLIs over the last since (whole minutes): counts, retry distribution, p50/p95/p99 of queue wait, run time and latency (seconds), SLO attainment, error budget, success and dead-letter rates, alert bounds. Granted to jobs_admin.';
REVOKE ALL ON FUNCTION jobs.metrics(interval) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jobs.metrics(interval) TO jobs_admin;
COMMIT;
