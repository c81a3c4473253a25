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
           wait_hist = jobs.histogram_add(m.wait_hist, excluded.wait_hist),
           run_hist = jobs.histogram_add(m.run_hist, excluded.run_hist),
           latency_hist = jobs.histogram_add(m.latency_hist, excluded.latency_hist);
    RETURN coalesce(cardinality(additions), 0);
END $$;
COMMENT ON FUNCTION jobs.merge_metrics(jobs.metric_minute[]) IS
    'Internal: add rollup rows into jobs.metric_minute (a row for an existing minute, kind and shard is added to it); returns how many. Not granted to any role.';
REVOKE ALL ON FUNCTION jobs.merge_metrics(jobs.metric_minute[]) FROM PUBLIC;
COMMIT;
