-- Deploy jobfence:merge_metrics to pg
-- requires: metric_minute
-- requires: histogram_add
BEGIN;
-- The one rule for adding rollup rows into jobs.metric_minute: a row for a (minute, kind,
-- shard) already there is added to it, counter by counter and bucket by bucket. jobs.tally
-- (every batch of transitions) and jobs.compact_metrics (folding shards) both go through it.
CREATE OR REPLACE FUNCTION jobs.merge_metrics(additions jobs.metric_minute[])
RETURNS integer
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
    INSERT INTO jobs.metric_minute AS m
    SELECT a.* FROM unnest(additions) AS a
    -- In key order: two writers sharing rows lock them in the same order, so a batch of
    -- several kinds cannot deadlock with another.
     ORDER BY a.minute, a.kind, a.shard
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
           -- A call only where both sides hold samples: most batches bring one histogram
           -- or none (a submit brings none), and every call has a price.
           wait_hist = CASE WHEN excluded.wait_hist IS NULL THEN m.wait_hist
                            WHEN m.wait_hist IS NULL THEN excluded.wait_hist
                            ELSE jobs.histogram_add(m.wait_hist, excluded.wait_hist) END,
           run_hist = CASE WHEN excluded.run_hist IS NULL THEN m.run_hist
                           WHEN m.run_hist IS NULL THEN excluded.run_hist
                           ELSE jobs.histogram_add(m.run_hist, excluded.run_hist) END,
           latency_hist = CASE WHEN excluded.latency_hist IS NULL THEN m.latency_hist
                               WHEN m.latency_hist IS NULL THEN excluded.latency_hist
                               ELSE jobs.histogram_add(m.latency_hist, excluded.latency_hist) END;
    RETURN coalesce(cardinality(additions), 0);
END $$;
COMMENT ON FUNCTION jobs.merge_metrics(jobs.metric_minute[]) IS
    'Internal: add rollup rows into jobs.metric_minute (a row for an existing minute, kind and shard is added to it); returns how many. Not granted to any role.';
REVOKE ALL ON FUNCTION jobs.merge_metrics(jobs.metric_minute[]) FROM PUBLIC;
COMMIT;
