-- Deploy jobfence:tally to pg
-- requires: metric_minute
-- requires: histogram_from
-- requires: merge_metrics
-- requires: job_type
-- requires: page
-- reads at run time: compensate (a later change in the plan; plpgsql resolves it per call)
BEGIN;
-- What a batch of transitions means for the metrics, recorded in the batch's own
-- transaction (docs/observability.md): one upsert per batch and kind into this minute's
-- row of this backend's shard, and the dead-letter page. The shard is the session's own
-- (1 + pid mod 32767; shard 0 is where compact_metrics folds closed minutes): the row stays
-- locked until the batch's transaction ends, and a transaction that tallies and then stays
-- open (an outbox producer's, doing its own work after its submit) must hold up nobody
-- else's claims and completions of the kind. Two sessions alive at once share a shard only
-- where pids run past 32767 and meet modulo it. Item i is (kinds[i], reasons[i],
-- expired[i], waits[i], runs[i], latencies[i], retries[i], job_ids[i]); reasons are event
-- reasons; waits: seconds since the job was due, on its first claim only; runs: seconds the
-- attempt that ended here ran (NULL when no attempt ended); latencies: seconds since it was
-- due, on terminal transitions; retries: the retries a terminal job took; job_ids:
-- needed only where a job may become a dead letter. Omitted arrays are all NULL.
CREATE OR REPLACE FUNCTION jobs.tally(kinds text[], reasons text[], expired boolean[] DEFAULT NULL,
                                      waits double precision[] DEFAULT NULL,
                                      runs double precision[] DEFAULT NULL,
                                      latencies double precision[] DEFAULT NULL,
                                      retries integer[] DEFAULT NULL, job_ids bigint[] DEFAULT NULL)
RETURNS integer
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
-- Planning the upsert costs more than running it on a batch of 100: plan it once.
SET plan_cache_mode = force_generic_plan
-- Items are grouped by hashing. A generic plan guesses 10 rows for an unnest and would sort
-- them on nine keys; a batch's items are mostly alike, so nearly every comparison walked
-- all nine: the sort was a third of a completion's tally (docs/performance.md,
-- "Instructions per job"). The ORDER BYs below sort all the same: nothing else can.
SET enable_sort = off
AS $$
DECLARE
    dead bigint[];
    added jobs.metric_minute[];
    shard smallint := 1 + pg_backend_pid() % 32767;
    n integer := cardinality(kinds);
    r integer;
    ended boolean;
    wait_hist integer[];
    run_hist integer[];
    latency_hist integer[];
    met bigint := 0;
    bands bigint[] := '{0,0,0,0}';
    attempts bigint := 0;
BEGIN
    IF coalesce(n, 0) = 0 THEN
        RETURN 0;
    END IF;

    -- One kind, one reason and nothing reaped: a worker's claim or completion, a producer's
    -- submit, nearly every call. The counters are then the batch's size or nothing, and each
    -- histogram is one pass over its own array, where the general statement below unnests
    -- all seven arrays together, joins the kinds and groups on nine keys: the tally of a
    -- judged run's completions falls from 27,000 to 16,000 instructions per job, most of
    -- what is left being the upsert, once per call (docs/performance.md, "Instructions per
    -- job"). The same rules as below, item for item; reason codes and
    -- buckets as described there. Arrays of unequal lengths take the general statement.
    r := array_position('{submitted,claimed,completed,retried,reaped,exhausted,failed,cancelled,timed_out}'::text[], reasons[1]);
    IF r IS NOT NULL AND kinds[1] = ALL (kinds) AND reasons[1] = ALL (reasons) AND cardinality(reasons) = n
       AND coalesce(NOT (true = ANY (expired)), true) AND coalesce(cardinality(expired), n) = n
       AND coalesce(cardinality(waits), n) = n AND coalesce(cardinality(runs), n) = n
       AND coalesce(cardinality(latencies), n) = n AND coalesce(cardinality(retries), n) = n THEN
        ended := r IN (3, 6, 7);
        IF waits IS NOT NULL THEN
            SELECT jobs.histogram_from(array_agg(g.bucket), array_agg(g.n)) INTO wait_hist
              FROM (SELECT CASE WHEN w.s < 0.001 THEN 1 ELSE least(92, 2 + floor(10 * log(w.s * 1000))::integer) END AS bucket,
                           count(*)::integer AS n
                      FROM unnest(waits) AS w(s) WHERE w.s IS NOT NULL GROUP BY 1) AS g;
        END IF;
        -- What an attempt that ended brings, in one pass over the items: its run time and
        -- latency buckets, the SLO and the retries' band grouped together (a batch's items
        -- share a handful of groups), as three statements cost three statements' set-up.
        -- A failed attempt is one that ran (it has a run time).
        IF ended OR (r IN (4, 5, 9) AND runs IS NOT NULL) THEN
            SELECT jobs.histogram_from(array_agg(g.run_bucket) FILTER (WHERE g.run_bucket IS NOT NULL),
                                       array_agg(g.n) FILTER (WHERE g.run_bucket IS NOT NULL)),
                   jobs.histogram_from(array_agg(g.latency_bucket) FILTER (WHERE g.latency_bucket IS NOT NULL),
                                       array_agg(g.n) FILTER (WHERE g.latency_bucket IS NOT NULL)),
                   coalesce(sum(g.n) FILTER (WHERE g.met), 0),
                   ARRAY[coalesce(sum(g.n) FILTER (WHERE g.band = 0), 0), coalesce(sum(g.n) FILTER (WHERE g.band = 1), 0),
                         coalesce(sum(g.n) FILTER (WHERE g.band = 2), 0), coalesce(sum(g.n) FILTER (WHERE g.band = 3), 0)]::bigint[],
                   coalesce(sum(g.n) FILTER (WHERE g.ran), 0)
              INTO run_hist, latency_hist, met, bands, attempts
              FROM (SELECT CASE WHEN u.run < 0.001 THEN 1 WHEN u.run IS NOT NULL
                                THEN least(92, 2 + floor(10 * log(u.run * 1000))::integer) END AS run_bucket,
                           CASE WHEN u.latency < 0.001 THEN 1 WHEN u.latency IS NOT NULL
                                THEN least(92, 2 + floor(10 * log(u.latency * 1000))::integer) END AS latency_bucket,
                           u.latency <= (SELECT date_part('epoch', t.slo_latency) FROM jobs.job_type AS t WHERE t.kind = kinds[1]) AS met,
                           least(coalesce(u.retries, 0), 3) AS band,
                           u.run IS NOT NULL AS ran,
                           count(*)::integer AS n
                      FROM unnest(kinds, runs, latencies, retries) AS u(kind, run, latency, retries)
                     GROUP BY 1, 2, 3, 4, 5) AS g;
            IF NOT ended THEN
                run_hist := NULL;
                latency_hist := NULL;
                met := 0;
                bands := '{0,0,0,0}';
            END IF;
            IF r NOT IN (4, 5, 6, 7, 9) OR runs IS NULL THEN
                attempts := 0;
            END IF;
        END IF;
        added := ARRAY[ROW(date_trunc('minute', now()), kinds[1], shard,
                           CASE WHEN r = 1 THEN n ELSE 0 END, CASE WHEN r = 2 THEN n ELSE 0 END,
                           CASE WHEN r = 3 THEN n ELSE 0 END, attempts, CASE WHEN r IN (4, 5, 9) THEN n ELSE 0 END,
                           0, CASE WHEN r = 8 THEN n ELSE 0 END, CASE WHEN r IN (6, 7) THEN n ELSE 0 END,
                           met, bands, wait_hist, run_hist, latency_hist)::jobs.metric_minute];
    ELSE
        -- Two levels: items are first counted by everything that matters to a counter or a
        -- histogram (usually a handful of groups per batch), then the groups are folded into one
        -- row per kind. Aggregating every item into a dozen filtered counters cost several
        -- times more. Histogram buckets (jobs.histogram_from): 1 below 1 ms, 2 + floor(10 *
        -- log10(milliseconds)) up to 92.
        -- Entering the queue or processing (insert_jobs, grant_leases) and a cancelled queued
        -- job (jobs.cancel) end no attempt and nothing the SLOs time: counts and the queue-wait
        -- histogram only, with a statement a third the size.
        IF runs IS NULL AND latencies IS NULL AND expired IS NULL AND job_ids IS NULL THEN
            PERFORM jobs.merge_metrics(ARRAY(
                WITH grouped AS (
                    SELECT u.kind, u.reason,
                           CASE WHEN u.wait < 0.001 THEN 1 WHEN u.wait IS NOT NULL
                                THEN least(92, 2 + floor(10 * log(u.wait * 1000))::integer) END AS wait_bucket,
                           count(*)::integer AS n
                      FROM unnest(kinds, reasons, waits) AS u(kind, reason, wait)
                     GROUP BY 1, 2, 3
                )
                SELECT ROW(date_trunc('minute', now()), g.kind, shard,
                           coalesce(sum(g.n) FILTER (WHERE g.reason = 'submitted'), 0),
                           coalesce(sum(g.n) FILTER (WHERE g.reason = 'claimed'), 0),
                           0, 0, 0, 0,
                           coalesce(sum(g.n) FILTER (WHERE g.reason = 'cancelled'), 0),
                           0, 0, '{0,0,0,0}',
                           jobs.histogram_from(array_agg(g.wait_bucket) FILTER (WHERE g.wait_bucket IS NOT NULL),
                                               array_agg(g.n) FILTER (WHERE g.wait_bucket IS NOT NULL)),
                           NULL, NULL)::jobs.metric_minute
                  FROM grouped AS g
                 GROUP BY g.kind));
            RETURN cardinality(kinds);
        END IF;

        -- Reasons become small codes once per item (1 submitted, 2 claimed, 3 completed,
        -- 4 retried, 5 reaped, 6 exhausted, 7 failed, 8 cancelled, 9 timed_out: a retried
        -- failure, counted in failed and retried, not in reaped), so the tests below compare
        -- integers, not text. "Ended" (3, 6, 7) is what the SLOs time and the retry distribution
        -- counts: a cancellation is the caller's decision, counted in cancelled alone.
        added := ARRAY(
        WITH item AS MATERIALIZED (
            SELECT u.kind,
                   array_position('{submitted,claimed,completed,retried,reaped,exhausted,failed,cancelled,timed_out}'::text[], u.reason) AS r,
                   coalesce(u.expired, false) AS expired, u.wait, u.run, u.latency, u.retries
              FROM unnest(kinds, reasons, expired, waits, runs, latencies, retries)
                   AS u(kind, reason, expired, wait, run, latency, retries)
        ), grouped AS (
            SELECT i.kind, i.r, i.expired, i.run IS NOT NULL AS attempted,
                   CASE WHEN i.r IN (3, 6, 7) THEN least(coalesce(i.retries, 0), 3) END AS retry_band,
                   CASE WHEN i.r IN (3, 6, 7) THEN i.latency <= date_part('epoch', t.slo_latency) END AS met,
                   CASE WHEN i.wait < 0.001 THEN 1 WHEN i.wait IS NOT NULL
                        THEN least(92, 2 + floor(10 * log(i.wait * 1000))::integer) END AS wait_bucket,
                   CASE WHEN i.r NOT IN (3, 6, 7) THEN NULL WHEN i.run < 0.001 THEN 1 WHEN i.run IS NOT NULL
                        THEN least(92, 2 + floor(10 * log(i.run * 1000))::integer) END AS run_bucket,
                   CASE WHEN i.r NOT IN (3, 6, 7) THEN NULL WHEN i.latency < 0.001 THEN 1 WHEN i.latency IS NOT NULL
                        THEN least(92, 2 + floor(10 * log(i.latency * 1000))::integer) END AS latency_bucket,
                   count(*)::integer AS n
              FROM item AS i
              LEFT JOIN jobs.job_type AS t ON t.kind = i.kind
             GROUP BY 1, 2, 3, 4, 5, 6, 7, 8, 9
        )
        SELECT ROW(date_trunc('minute', now()), g.kind, shard,
                   coalesce(sum(g.n) FILTER (WHERE g.r = 1), 0),
                   coalesce(sum(g.n) FILTER (WHERE g.r = 2), 0),
                   coalesce(sum(g.n) FILTER (WHERE g.r = 3), 0),
                   -- A failed attempt is one that ended (it has a run time) other than by success or
                   -- cancellation; a queued job failed for a spent budget had no attempt.
                   coalesce(sum(g.n) FILTER (WHERE g.attempted AND g.r IN (4, 5, 6, 7, 9)), 0),
                   coalesce(sum(g.n) FILTER (WHERE g.r IN (4, 5, 9)), 0),
                   coalesce(sum(g.n) FILTER (WHERE g.expired), 0),
                   coalesce(sum(g.n) FILTER (WHERE g.r = 8), 0),
                   coalesce(sum(g.n) FILTER (WHERE g.r IN (6, 7)), 0),
                   coalesce(sum(g.n) FILTER (WHERE g.met), 0),
                   ARRAY[coalesce(sum(g.n) FILTER (WHERE g.retry_band = 0), 0), coalesce(sum(g.n) FILTER (WHERE g.retry_band = 1), 0),
                         coalesce(sum(g.n) FILTER (WHERE g.retry_band = 2), 0), coalesce(sum(g.n) FILTER (WHERE g.retry_band = 3), 0)]::bigint[],
                   jobs.histogram_from(array_agg(g.wait_bucket) FILTER (WHERE g.wait_bucket IS NOT NULL),
                                       array_agg(g.n) FILTER (WHERE g.wait_bucket IS NOT NULL)),
                   jobs.histogram_from(array_agg(g.run_bucket) FILTER (WHERE g.run_bucket IS NOT NULL),
                                       array_agg(g.n) FILTER (WHERE g.run_bucket IS NOT NULL)),
                   jobs.histogram_from(array_agg(g.latency_bucket) FILTER (WHERE g.latency_bucket IS NOT NULL),
                                       array_agg(g.n) FILTER (WHERE g.latency_bucket IS NOT NULL)))::jobs.metric_minute
          FROM grouped AS g
         GROUP BY g.kind);
    END IF;
    PERFORM jobs.merge_metrics(added);
    -- A dead letter pages someone, and the page cannot vanish: its row in jobs.page commits
    -- with the failure (a rolled-back failure pages nobody), and the reapers' forwarders
    -- deliver it at least once. The NOTIFY only wakes them sooner; at most 300 ids per
    -- message, well under PostgreSQL's 8000-byte payload limit. Reading jobs.job sees the
    -- calling statement's update: a volatile function takes a fresh snapshot per query.
    IF job_ids IS NOT NULL AND ('exhausted' = ANY (reasons) OR 'failed' = ANY (reasons)) THEN
        dead := ARRAY(SELECT d.id FROM unnest(job_ids, reasons) AS d(id, reason)
                       WHERE d.reason IN ('exhausted', 'failed') AND d.id IS NOT NULL ORDER BY d.id);
        IF cardinality(dead) > 0 THEN
            INSERT INTO jobs.page (job_id, kind, queue, error, reason, retry_count, max_retries, failed_at)
            SELECT j.id, j.kind, j.queue, j.error, d.reason, j.retry_count, j.max_retries, coalesce(j.finished_at, now())
              FROM unnest(job_ids, reasons) AS d(id, reason)
              JOIN jobs.job AS j ON j.id = d.id
             WHERE d.reason IN ('exhausted', 'failed')
             ORDER BY j.id;
            -- A kind with an on_dead kind gets its compensation in this same transaction.
            PERFORM jobs.compensate(job_ids, reasons);
            PERFORM pg_notify('jobs_dead_lettered', json_build_object('ids', c.ids)::text)
               FROM (SELECT array_agg(u.id ORDER BY u.ord) AS ids
                       FROM unnest(dead) WITH ORDINALITY AS u(id, ord)
                      GROUP BY (u.ord - 1) / 300) AS c;
        END IF;
    END IF;
    RETURN cardinality(kinds);
END $$;
COMMENT ON FUNCTION jobs.tally(text[], text[], boolean[], double precision[], double precision[], double precision[], integer[], bigint[]) IS
    'Internal: record a batch of transitions in jobs.metric_minute (counts, retry distribution, SLO, latency histograms) write a page (jobs.page) for every dead letter and wake the forwarders on jobs_dead_lettered. Not granted to any role.';
REVOKE ALL ON FUNCTION jobs.tally(text[], text[], boolean[], double precision[], double precision[], double precision[], integer[], bigint[]) FROM PUBLIC;
COMMIT;
