-- pgTAP tests for jobs.metrics(since), the rollup jobs.tally keeps, the latency histograms and
-- jobs.dead_letters. Contract: docs/observability.md. A controlled history: timestamps moved
-- back with pg_temp.elapse give known waits, run times and latencies, so counts, attainment
-- and rates are exact and percentiles fall in a known bucket (a factor of 10^0.1).
BEGIN;
SELECT plan(75);
\ir helpers/lease_helpers.psql

-- the histogram helpers. The bucket rule as documented (docs/observability.md), written out
-- here so the test can check jobs.tally against it.
CREATE FUNCTION pg_temp.bucket(v double precision) RETURNS integer LANGUAGE sql IMMUTABLE
    AS $$ SELECT CASE WHEN v < 0.001 THEN 1 ELSE least(92, 2 + floor(10 * log(v * 1000))::integer) END $$;
-- the histogram of some durations, built from the rule
CREATE FUNCTION pg_temp.hist(s double precision[]) RETURNS integer[] LANGUAGE sql IMMUTABLE
    AS $$ SELECT jobs.histogram_from(array_agg(b.k), array_agg(b.n::integer))
            FROM (SELECT pg_temp.bucket(x) AS k, count(*) AS n FROM unnest(s) AS x GROUP BY 1) AS b $$;
SELECT is(pg_temp.hist(ARRAY[0.0005, 0.001, 1, 1e7]::double precision[]),
          (SELECT array_agg(CASE WHEN k IN (1, 2, 32, 92) THEN 1 ELSE 0 END ORDER BY k) FROM generate_series(1, 92) AS k),
          'histogram: below 1 ms -> bucket 1, 1 ms -> 2, 1 s -> 32, beyond 10^6 s -> 92');
SELECT is(jobs.histogram_from('{}', '{}'), NULL, 'histogram_from: no samples -> NULL');
SELECT is(jobs.histogram_from(ARRAY[3, 3, 5], ARRAY[1, 2, 4]),
          (SELECT array_agg(CASE k WHEN 3 THEN 3 WHEN 5 THEN 4 ELSE 0 END ORDER BY k) FROM generate_series(1, 92) AS k),
          'histogram_from: pairs of one bucket add up');
SELECT is(jobs.histogram_add(pg_temp.hist(ARRAY[1.0]), NULL), pg_temp.hist(ARRAY[1.0]), 'histogram_add: NULL is empty');
SELECT is(jobs.histogram_add(pg_temp.hist(ARRAY[1.0]), pg_temp.hist(ARRAY[1.0, 2.0])), pg_temp.hist(ARRAY[1.0, 1.0, 2.0]),
          'histogram_add: bucket by bucket');
SELECT is(jobs.histogram_add('{1,NULL,3}', '{0,0,0,4}'), '{1,0,3,4}'::integer[],
          'histogram_add: a NULL bucket counts as 0, and a longer second histogram lengthens the sum');
SELECT is(jobs.histogram_add('{1,2,3}', '{0,5}'), '{1,7,3}'::integer[],
          'histogram_add: a shorter second histogram adds to the buckets it has');
SELECT is(jobs.histogram_quantile(NULL, 0.5), NULL, 'histogram_quantile: empty -> NULL');
SELECT ok(jobs.histogram_quantile(pg_temp.hist(ARRAY[1.0]), 0.5) BETWEEN 1.0 AND 10 ^ 0.1,
          'histogram_quantile: inside the bucket of the one sample');
SELECT ok(jobs.histogram_quantile(pg_temp.hist(ARRAY(SELECT g::double precision FROM generate_series(1, 100) AS g)), 0.95)
          BETWEEN 95 / 10 ^ 0.1 AND 95 * 10 ^ 0.1, 'histogram_quantile: p95 of 1..100 s within one bucket of 95 s');
SELECT is(jobs.histogram_quantile(pg_temp.hist(ARRAY[1e8]::double precision[]), 0.5), 1e6::double precision,
          'histogram_quantile: the open last bucket answers its lower bound');
-- jobs.tally buckets samples by the same rule (a spread from 0.1 ms to 10^7 s).
DO $$ BEGIN
    PERFORM jobs.tally(array_fill('tm.rule'::text, ARRAY[15]), array_fill('completed'::text, ARRAY[15]), NULL, NULL, NULL,
                       ARRAY(SELECT 10 ^ (e / 2.0 - 4) FROM generate_series(0, 14) AS e) || ARRAY[]::double precision[]);
END $$;
SELECT is((SELECT latency_hist FROM jobs.metric_minute WHERE kind = 'tm.rule'),
          pg_temp.hist(ARRAY(SELECT 10 ^ (e / 2.0 - 4) FROM generate_series(0, 14) AS e)),
          'tally: latency samples fall in the documented buckets');
DELETE FROM jobs.metric_minute WHERE kind = 'tm.rule';

-- a controlled history for kind tm.k.
DO $$
DECLARE lv bigint;
BEGIN
    PERFORM jobs.define_type('tm.k', queue => 'tm', max_retries => 1, backoff_base => '1 second', backoff_max => '1 second',
                             slo_latency => '10 seconds', slo_target => 0.75, slo_success => 0.9,
                             max_backlog => 50, run_time_budget => '5 seconds', max_failure_rate => 0.1);
    PERFORM jobs.define_type('tm.idle', queue => 'tm');
    -- a: waits 2 s, runs 3 s, done 5 s after submission.
    PERFORM pg_temp.job('a', 'tm.k');
    PERFORM pg_temp.elapse(pg_temp.id('a'), '2 seconds');
    PERFORM jobs.claim(pg_temp.id('a'), 'w1');
    PERFORM pg_temp.elapse(pg_temp.id('a'), '3 seconds');
    PERFORM jobs.complete(pg_temp.id('a'), 'w1', 1, '{}');
    -- b: waits 20 s, done 20 s after submission: misses the 10 s objective.
    PERFORM pg_temp.job('b', 'tm.k');
    PERFORM pg_temp.elapse(pg_temp.id('b'), '20 seconds');
    PERFORM jobs.claim(pg_temp.id('b'), 'w1');
    PERFORM jobs.complete(pg_temp.id('b'), 'w1', 1, '{}');
    -- c: a fatal error: a dead letter after 0 retries.
    PERFORM pg_temp.running('c', 'tm.k', 'w1');
    PERFORM jobs.fail(pg_temp.id('c'), 'w1', 1, 'bad input', false);
    -- d: fails once, then succeeds: ends after 1 retry, 5 s after submission.
    PERFORM pg_temp.running('d', 'tm.k', 'w1');
    PERFORM jobs.fail(pg_temp.id('d'), 'w1', 1, 'HTTP 503');
    PERFORM pg_temp.elapse(pg_temp.id('d'), '5 seconds');
    SELECT l.lease_version INTO lv FROM jobs.claim(pg_temp.id('d'), 'w1') AS l;
    PERFORM jobs.complete(pg_temp.id('d'), 'w1', lv, '{}');
    -- e: cancelled while queued.
    PERFORM pg_temp.job('e', 'tm.k');
    PERFORM jobs.cancel(pg_temp.id('e'));
    -- f: its lease expires; the reaper queues it again.
    PERFORM pg_temp.running('f', 'tm.k', 'w1');
    PERFORM pg_temp.elapse(pg_temp.id('f'), '30 seconds');
    PERFORM jobs.reap();
    -- g: fails twice: exhausted, a dead letter after 1 retry, 5 s after submission.
    PERFORM pg_temp.running('g', 'tm.k', 'w1');
    PERFORM jobs.fail(pg_temp.id('g'), 'w1', 1, 'HTTP 503');
    PERFORM pg_temp.elapse(pg_temp.id('g'), '5 seconds');
    SELECT l.lease_version INTO lv FROM jobs.claim(pg_temp.id('g'), 'w1') AS l;
    PERFORM jobs.fail(pg_temp.id('g'), 'w1', lv, 'HTTP 503');
    -- a minute two hours ago: outside a one-hour window, inside a three-hour one.
    INSERT INTO jobs.metric_minute (minute, kind, shard, submitted, succeeded, latency_hist)
    VALUES (date_trunc('minute', now() - interval '2 hours'), 'tm.k', 0, 100, 100, pg_temp.hist(ARRAY[1000.0]));
END $$;

CREATE TEMP TABLE m AS SELECT * FROM jobs.metrics('1 hour') WHERE kind = 'tm.k';
SELECT is((SELECT count(*) FROM m), 1::bigint, 'metrics: one row for the kind');
SELECT is((SELECT queue FROM m), 'tm', 'metrics: the kind''s queue');
SELECT is((SELECT submitted FROM m), 7::bigint, 'metrics: submitted counts every created job');
SELECT is((SELECT started FROM m), 8::bigint, 'metrics: started counts every claim (d and g twice)');
SELECT is((SELECT succeeded FROM m), 3::bigint, 'metrics: succeeded = a, b, d');
SELECT is((SELECT failed FROM m), 5::bigint, 'metrics: failed attempts = c, d once, f (reaped), g twice');
SELECT is((SELECT retried FROM m), 3::bigint, 'metrics: retried = d, f, g once each');
SELECT is((SELECT reaped FROM m), 1::bigint, 'metrics: reaped = the expired lease of f');
SELECT is((SELECT cancelled FROM m), 1::bigint, 'metrics: cancelled = e');
SELECT is((SELECT dead_lettered FROM m), 2::bigint, 'metrics: dead_lettered = c (fatal) and g (exhausted)');
SELECT is((SELECT ARRAY[ended_after_0, ended_after_1, ended_after_2, ended_after_3_plus] FROM m), ARRAY[3, 2, 0, 0]::bigint[],
          'metrics: retry distribution: a, b, c after 0 retries; d, g after 1 (the cancelled e is not an ending the system chose)');
SELECT is((SELECT slo_met FROM m), 4::bigint, 'metrics: 4 of 5 ended jobs within 10 s (b took 20 s; e was cancelled, not timed)');
SELECT is((SELECT round(slo_attainment::numeric, 6) FROM m), round(4 / 5.0, 6), 'metrics: slo_attainment = 4/5');
SELECT is((SELECT round(error_budget_remaining::numeric, 6) FROM m), round(1 - (1 / 5.0) / 0.25, 6),
          'metrics: error_budget_remaining = 1 - (1/5) / (1 - 0.75)');
SELECT is((SELECT success_rate FROM m), 0.6::double precision, 'metrics: success_rate = 3 / (3 + 2 dead letters)');
SELECT is((SELECT dead_letter_rate FROM m), 0.4::double precision, 'metrics: dead_letter_rate = 2 / 5');
SELECT is((SELECT failure_rate FROM m), 0.625::double precision, 'metrics: failure_rate = 5 failed attempts / (3 + 5)');
SELECT is((SELECT slo_latency FROM m), 10::double precision, 'metrics: slo_latency in seconds');
SELECT is((SELECT slo_target FROM m), 0.75, 'metrics: slo_target');
SELECT is((SELECT slo_success_target FROM m), 0.9, 'metrics: slo_success_target');
SELECT is((SELECT ARRAY[max_backlog::double precision, run_time_budget, max_failure_rate::double precision] FROM m),
          ARRAY[50, 5, 0.1]::double precision[], 'metrics: the alert bounds as declared');
SELECT ok((SELECT latency_p99 FROM m) BETWEEN 20 / 10 ^ 0.1 AND 20 * 10 ^ 0.1, 'metrics: latency p99 within one bucket of b''s 20 s');
SELECT ok((SELECT wait_p99 FROM m) BETWEEN 20 / 10 ^ 0.1 AND 20 * 10 ^ 0.1, 'metrics: wait p99 within one bucket of b''s 20 s');
SELECT ok((SELECT wait_p50 FROM m) < 0.001, 'metrics: wait p50 below 1 ms (four of six jobs were claimed at once)');
SELECT ok((SELECT run_p99 FROM m) BETWEEN 3 / 10 ^ 0.1 AND 3 * 10 ^ 0.1, 'metrics: run p99 within one bucket of a''s 3 s');
SELECT is((SELECT window_seconds FROM m), date_part('epoch', now() - date_trunc('minute', now() - interval '1 hour')),
          'metrics: the window is whole minutes');
SELECT is((SELECT submitted FROM jobs.metrics('3 hours') WHERE kind = 'tm.k'), 107::bigint,
          'metrics: a wider window adds the minute two hours ago');
SELECT ok((SELECT latency_p99 FROM jobs.metrics('3 hours') WHERE kind = 'tm.k') > 500,
          'metrics: histograms of different minutes are added');
SELECT is((SELECT ARRAY[submitted, succeeded] FROM jobs.metrics('1 hour') WHERE kind = 'tm.idle'), ARRAY[0, 0]::bigint[],
          'metrics: a declared kind without activity has a row of zeros');
SELECT is((SELECT slo_attainment FROM jobs.metrics('1 hour') WHERE kind = 'tm.idle'), NULL,
          'metrics: and no attainment (nothing to divide)');
SELECT is((SELECT run_time_budget FROM jobs.metrics('1 hour') WHERE kind = 'tm.idle'), 15::double precision,
          'metrics: run_time_budget defaults to half the kind''s timeout, a bound a p95 can cross');
SELECT is(pg_temp.error_of($$ SELECT * FROM jobs.metrics('0 seconds') $$), '22023 jobs.metrics hint=true', 'metrics: since 0 -> 22023');
SELECT is(pg_temp.error_of($$ SELECT * FROM jobs.metrics(NULL) $$), '22023 jobs.metrics hint=true', 'metrics: since NULL -> 22023');
SELECT is(pg_temp.error_of($$ SELECT * FROM jobs.metrics('401 days') $$), '22023 jobs.metrics hint=true', 'metrics: since beyond 400 days -> 22023');

-- percentiles of a known spread: ten jobs waiting 1..10 s, claimed and done in one batch each.
DO $$
DECLARE ids bigint[];
BEGIN
    PERFORM jobs.define_type('tm.lat', queue => 'tm');
    ids := ARRAY(SELECT s.id FROM jobs.submit_many((SELECT jsonb_agg(jsonb_build_object('kind', 'tm.lat')) FROM generate_series(1, 10))) AS s ORDER BY s.id);
    PERFORM pg_temp.elapse(ids[i], make_interval(secs => i)) FROM generate_series(1, 10) AS i;
    PERFORM jobs.complete_many(array_agg(l.job_id), 'w1', array_agg(l.lease_version), array_agg('{}'::jsonb))
       FROM jobs.claim_many(ids, 'w1') AS l;
END $$;
CREATE TEMP TABLE ml AS SELECT * FROM jobs.metrics('1 hour') WHERE kind = 'tm.lat';
SELECT is((SELECT ARRAY[submitted, started, succeeded] FROM ml), ARRAY[10, 10, 10]::bigint[], 'metrics: batches are counted item by item');
SELECT ok((SELECT wait_p50 FROM ml) BETWEEN 5 / 10 ^ 0.1 AND 5 * 10 ^ 0.1, 'metrics: wait p50 of 1..10 s within one bucket of 5 s');
SELECT ok((SELECT wait_p95 FROM ml) BETWEEN 10 / 10 ^ 0.1 AND 10 * 10 ^ 0.1, 'metrics: wait p95 within one bucket of 10 s');
SELECT ok((SELECT latency_p50 FROM ml) BETWEEN 5 / 10 ^ 0.1 AND 5 * 10 ^ 0.1, 'metrics: latency p50 within one bucket of 5 s');
SELECT ok((SELECT run_p99 FROM ml) < 0.001, 'metrics: run time below 1 ms (claimed and done at once)');
SELECT is((SELECT slo_met FROM ml), 10::bigint, 'metrics: all ten within the default 25 s');
SELECT is((SELECT error_budget_remaining FROM ml), 1::double precision, 'metrics: the error budget is untouched');

-- a scheduled job is timed from when it was due, not from its submission.
DO $$ BEGIN
    PERFORM jobs.define_type('tm.sched', queue => 'tm', slo_latency => '10 seconds');
    PERFORM pg_temp.job('sched', 'tm.sched', '{}', now() + interval '1 hour');
    -- an hour and two seconds later: due two seconds ago
    PERFORM pg_temp.elapse(pg_temp.id('sched'), '1 hour 2 seconds');
    PERFORM jobs.claim(pg_temp.id('sched'), 'w1');
    PERFORM jobs.complete(pg_temp.id('sched'), 'w1', 1, '{}');
END $$;
SELECT ok((SELECT wait_p50 FROM jobs.metrics('1 hour') WHERE kind = 'tm.sched') BETWEEN 2 / 10 ^ 0.1 AND 2 * 10 ^ 0.1,
          'metrics: a scheduled job''s queue wait counts from its run_after (2 s), not its submission (an hour ago)');
SELECT is((SELECT slo_met FROM jobs.metrics('1 hour') WHERE kind = 'tm.sched'), 1::bigint,
          'metrics: and it meets the 10 s objective');

-- the rollup rolls back with its transaction: a failed batch is not counted.
SELECT is(pg_temp.error_of($$ SELECT * FROM jobs.submit_many('[{"kind": "tm.lat"}, {"kind": "tm.nosuch"}]') $$),
          'JB005 jobs.submit_many hint=true', 'metrics: a rejected batch...');
SELECT is((SELECT submitted FROM jobs.metrics('1 hour') WHERE kind = 'tm.lat'), 10::bigint, '...adds nothing to the rollup');

-- compaction: the shards of a closed minute fold into shard 0, and the figures do not move.
INSERT INTO jobs.metric_minute (minute, kind, shard, submitted, succeeded, slo_met, ended_after, latency_hist)
SELECT date_trunc('minute', now()) - interval '5 minutes', 'tm.k', s, 10 * s, s, s, ARRAY[s, 0, 0, 1],
       pg_temp.hist(ARRAY[s::double precision])
  FROM generate_series(1, 3) AS s;
CREATE TEMP TABLE before_compaction AS SELECT * FROM jobs.metrics('1 hour') WHERE kind = 'tm.k';
SELECT is(jobs.compact_metrics(), 3, 'compact_metrics: folds the three shard rows of the closed minute (not the current one)');
SELECT is((SELECT count(*) FROM jobs.metric_minute WHERE kind = 'tm.k' AND minute = date_trunc('minute', now()) - interval '5 minutes'),
          1::bigint, 'compact_metrics: one row left for that minute...');
SELECT is((SELECT (shard, submitted, succeeded, slo_met, ended_after)::text FROM jobs.metric_minute
            WHERE kind = 'tm.k' AND minute = date_trunc('minute', now()) - interval '5 minutes'),
          '(0,60,6,6,"{6,0,0,3}")', '...in shard 0, with the sums');
SELECT is((SELECT latency_hist FROM jobs.metric_minute WHERE kind = 'tm.k' AND minute = date_trunc('minute', now()) - interval '5 minutes'),
          pg_temp.hist(ARRAY[1.0, 2.0, 3.0]), 'compact_metrics: histograms are added bucket by bucket');
SELECT is((SELECT m::text FROM jobs.metrics('1 hour') AS m WHERE kind = 'tm.k'), (SELECT b::text FROM before_compaction AS b),
          'compact_metrics: jobs.metrics answers the same before and after');
SELECT is(jobs.compact_metrics(), 0, 'compact_metrics: nothing left to fold');
SELECT is(pg_temp.error_of($$ SELECT jobs.compact_metrics(0) $$), '22023 jobs.compact_metrics hint=true', 'compact_metrics: max_rows 0 -> 22023');

-- dead letters.
SELECT results_eq($$ SELECT id, kind, reason, error, retry_count
                      FROM jobs.dead_letters(ARRAY[pg_temp.id('a'), pg_temp.id('c'), pg_temp.id('e'), pg_temp.id('g'), pg_temp.id('g'), 0]) $$,
                  $$ VALUES (pg_temp.id('c'), 'tm.k', 'failed', 'bad input', 1),
                            (pg_temp.id('g'), 'tm.k', 'exhausted', 'HTTP 503', 2) $$,
                  'dead_letters: the fatal and the exhausted job, once each; not the done, the cancelled or an unknown id');
SELECT is(pg_temp.error_of($$ SELECT * FROM jobs.dead_letters(NULL) $$), '22023 jobs.dead_letters hint=true', 'dead_letters: NULL -> 22023');

-- prune takes the rollup's old minutes with the jobs.
SELECT ok(jobs.prune('1 hour') >= 0, 'prune: runs');
SELECT is((SELECT count(*) FROM jobs.metric_minute WHERE minute < now() - interval '1 hour'), 0::bigint,
          'prune: metric minutes older than the cutoff are gone');
SELECT is((SELECT submitted FROM jobs.metrics('1 hour') WHERE kind = 'tm.k'), 67::bigint, 'prune: the recent minutes stay (7 of the history, 60 of the folded minute)');

-- jobs.tally's two roads give the same row. One kind and one reason with nothing reaped takes
-- the short one; the same items beside one item of another kind take the general statement.
-- Samples below 1 ms, NULLs, retries past the top band and latencies either side of the SLO.
SELECT jobs.define_type('tm.fast', slo_latency => '2 seconds');
SELECT jobs.define_type('tm.general', slo_latency => '2 seconds');
SELECT jobs.define_type('tm.other');
CREATE FUNCTION pg_temp.tally_both(reason text, waits double precision[], runs double precision[],
                                   latencies double precision[], retries integer[]) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    n integer := greatest(cardinality(waits), cardinality(runs), cardinality(latencies), cardinality(retries));
    fast jobs.metric_minute;
    general jobs.metric_minute;
BEGIN
    DELETE FROM jobs.metric_minute WHERE kind IN ('tm.fast', 'tm.general', 'tm.other');
    PERFORM jobs.tally(array_fill('tm.fast'::text, ARRAY[n]), array_fill(reason, ARRAY[n]),
                       array_fill(false, ARRAY[n]), waits, runs, latencies, retries, NULL);
    PERFORM jobs.tally(array_fill('tm.general'::text, ARRAY[n]) || 'tm.other'::text, array_fill(reason, ARRAY[n + 1]),
                       array_fill(false, ARRAY[n + 1]), waits || NULL::double precision, runs || NULL::double precision,
                       latencies || NULL::double precision, retries || NULL::integer, NULL);
    SELECT * INTO fast FROM jobs.metric_minute WHERE kind = 'tm.fast';
    SELECT * INTO general FROM jobs.metric_minute WHERE kind = 'tm.general';
    fast.kind := 'tm.general';
    RETURN fast IS NOT DISTINCT FROM general AND fast.started + fast.succeeded + fast.failed + fast.retried
                                                 + fast.dead_lettered + fast.submitted + fast.cancelled > 0;
END $$;
SELECT ok(pg_temp.tally_both('completed', NULL, ARRAY[0.0004, 0.002, 0.5, NULL, 3], ARRAY[0.0002, 2, 2.5, 1.9, NULL],
                             ARRAY[0, 1, 2, 5, NULL]),
          'tally: completions of one kind count as the general statement counts them (histograms, SLO, retry bands)');
SELECT ok(pg_temp.tally_both('completed', NULL, ARRAY[0.01, 0.02, 0.03], ARRAY[1, 2, 3], NULL),
          'tally: ... and without retries (every completion in the first band)');
SELECT ok(pg_temp.tally_both('claimed', ARRAY[0.0001, 0.3, NULL, 40], NULL, NULL, NULL),
          'tally: claims of one kind (queue-wait histogram, a NULL wait not sampled)');
SELECT ok(pg_temp.tally_both('exhausted', NULL, ARRAY[0.2, NULL, 0.4], ARRAY[1, 2, 3], ARRAY[3, 3, 4]),
          'tally: exhausted attempts (failed where they ran, dead letters)');
SELECT ok(pg_temp.tally_both('retried', NULL, ARRAY[0.2, NULL], NULL, ARRAY[1, 2]),
          'tally: retried attempts (failed and retried, nothing ended)');
SELECT ok(pg_temp.tally_both('submitted', NULL, NULL, NULL, ARRAY[NULL, NULL]::integer[]),
          'tally: submits of one kind');

SELECT * FROM finish();
ROLLBACK;
