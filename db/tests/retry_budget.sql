-- pgTAP tests for retry arithmetic end to end: budget, backoff bounds, reaped jobs.
-- Contract: docs/design.md §2 (retry rule: max_retries 3 = at most 4 attempts; backoff; reaped jobs requeue
-- at once with error 'lease expired'), §3 (max_retries copied at submit), §4 (backoff formula).
BEGIN;
SELECT plan(32);
-- Shared helpers (temporary objects, gone with the ROLLBACK).
\ir helpers/lease_helpers.psql

-- one attempt: make the job due (its backoff has passed), claim it, fail it
CREATE FUNCTION pg_temp.attempt(text, text DEFAULT 'boom') RETURNS text LANGUAGE plpgsql AS $$
DECLARE l jobs.lease; o jobs.outcome; j jobs.job;
BEGIN
    UPDATE jobs.job SET run_after = now() WHERE id = pg_temp.id($1) AND status = 'queued';
    SELECT * INTO l FROM jobs.claim(pg_temp.id($1), 'w');
    IF l.job_id IS NULL THEN RETURN 'not claimable'; END IF;
    o := jobs.fail(l.job_id, 'w', l.lease_version, $2);
    SELECT * INTO j FROM jobs.job WHERE id = l.job_id;
    RETURN format('attempt=%s status=%s retry_count=%s', l.attempt, o.status, j.retry_count);
END $$;
-- one attempt that the reaper ends
CREATE FUNCTION pg_temp.reaped_attempt(text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE l jobs.lease; j jobs.job;
BEGIN
    UPDATE jobs.job SET run_after = now() WHERE id = pg_temp.id($1) AND status = 'queued';
    SELECT * INTO l FROM jobs.claim(pg_temp.id($1), 'w');
    IF l.job_id IS NULL THEN RETURN 'not claimable'; END IF;
    PERFORM pg_temp.elapse(l.job_id, '1 hour');
    PERFORM jobs.reap();
    SELECT * INTO j FROM jobs.job WHERE id = l.job_id;
    RETURN format('attempt=%s status=%s retry_count=%s', l.attempt, j.status, j.retry_count);
END $$;

DO $$ BEGIN
    PERFORM jobs.define_type('tc.rb');   -- default budget and backoff (base 1 s, cap 5 min)
    PERFORM jobs.define_type('tc.rbbig', max_retries => 1000);
    PERFORM jobs.define_type('tc.rb0', max_retries => 0);
    PERFORM jobs.define_type('tc.rbcap', max_retries => 5, backoff_base => '10 seconds', backoff_max => '15 seconds');
    PERFORM pg_temp.job('a', 'tc.rb');
END $$;

SELECT is((SELECT max_retries FROM jobs.job WHERE id = pg_temp.id('a')), 3, 'retry_budget: default budget of a kind -> max_retries 3 on the job');
SELECT is(pg_temp.attempt('a'), 'attempt=1 status=queued retry_count=1', 'retry_budget: max_retries 3, attempt 1 fails -> queued, retry_count 1');
SELECT is(pg_temp.attempt('a'), 'attempt=2 status=queued retry_count=2', 'retry_budget: attempt 2 fails -> queued, retry_count 2');
SELECT is(pg_temp.attempt('a'), 'attempt=3 status=queued retry_count=3', 'retry_budget: attempt 3 fails -> queued, retry_count 3');
SELECT is(pg_temp.attempt('a'), 'attempt=4 status=failed retry_count=4', 'retry_budget: attempt 4 fails -> failed (at most 4 attempts)');
SELECT is(pg_temp.attempt('a'), 'not claimable', 'retry_budget: no fifth attempt');
SELECT results_eq($$ SELECT reason, lease_version FROM jobs.history WHERE job_id = pg_temp.id('a') AND reason IN ('retried', 'exhausted') ORDER BY id $$,
    $$ VALUES ('retried'::text, 2::bigint), ('retried', 4), ('retried', 6), ('exhausted', 7) $$,
    'retry_budget: three retried events then exhausted; lease_version +1 per claim and per requeue, not on failed');
SELECT is((SELECT error FROM jobs.job WHERE id = pg_temp.id('a')), 'boom', 'retry_budget: error keeps the latest failure');

DO $$ BEGIN PERFORM pg_temp.job('z', 'tc.rb0'); END $$;
SELECT is(pg_temp.attempt('z'), 'attempt=1 status=failed retry_count=1', 'retry_budget: max_retries 0 -> one attempt only');

-- reaped attempts count against the same budget, with no backoff and error 'lease expired'
DO $$ BEGIN PERFORM pg_temp.job('m', 'tc.rb'); END $$;
SELECT is(pg_temp.reaped_attempt('m'), 'attempt=1 status=queued retry_count=1', 'retry_budget: attempt 1 reaped -> queued, retry_count 1');
SELECT results_eq($$ SELECT run_after, error, lease_version FROM jobs.job WHERE id = pg_temp.id('m') $$,
    $$ VALUES (now(), 'lease expired'::text, 2::bigint) $$, 'retry_budget: reaped job -> due now (no backoff), error lease expired, lease_version 2');
SELECT is(pg_temp.attempt('m', 'e2'), 'attempt=2 status=queued retry_count=2', 'retry_budget: attempt 2 failed by the worker -> queued');
SELECT is(pg_temp.reaped_attempt('m'), 'attempt=3 status=queued retry_count=3', 'retry_budget: attempt 3 reaped -> queued');
SELECT is(pg_temp.reaped_attempt('m'), 'attempt=4 status=failed retry_count=4', 'retry_budget: attempt 4 reaped -> failed (budget spent by reaps and fails together)');
SELECT results_eq($$ SELECT error, finished_at, lease_version FROM jobs.job WHERE id = pg_temp.id('m') $$,
    $$ VALUES ('lease expired'::text, now(), 7::bigint) $$, 'retry_budget: reaper-exhausted job -> error lease expired, finished_at now');

-- non-retryable failures and cancels use up an attempt too
DO $$ BEGIN PERFORM pg_temp.job('n', 'tc.rb'); END $$;
SELECT is((jobs.fail(pg_temp.id('n'), 'w', (SELECT lease_version FROM jobs.claim(pg_temp.id('n'), 'w')), 'bad input', retryable => false)).status,
    'failed'::jobs.status, 'retry_budget: non-retryable failure with 3 retries left -> failed');
SELECT is((SELECT retry_count FROM jobs.job WHERE id = pg_temp.id('n')), 1, 'retry_budget: the non-retryable attempt is counted');

-- max_retries is copied at submit: a changed definition applies to new jobs only
DO $$ BEGIN
    PERFORM pg_temp.job('old', 'tc.rb');
    PERFORM jobs.define_type('tc.rb', max_retries => 0);
    PERFORM pg_temp.job('new', 'tc.rb');
END $$;
SELECT is(pg_temp.attempt('old'), 'attempt=1 status=queued retry_count=1', 'retry_budget: job submitted under max_retries 3 keeps its budget after the kind changes');
SELECT is(pg_temp.attempt('new'), 'attempt=1 status=failed retry_count=1', 'retry_budget: job submitted after the change gets the new budget');
DO $$ BEGIN PERFORM jobs.define_type('tc.rb'); END $$;

-- backoff bounds: d = least(backoff_max, backoff_base * 2^(retry_count - 1)); d/2 <= delay <= d
CREATE TEMP TABLE delays (kind text, retry_count int, delay interval);
CREATE FUNCTION pg_temp.fail_all(text, int) RETURNS void LANGUAGE plpgsql AS $$
DECLARE l jobs.lease; o jobs.outcome;
BEGIN
    UPDATE jobs.job SET run_after = now() WHERE kind = $1 AND status = 'queued' AND payload ? 'sample';
    FOR l IN SELECT * FROM jobs.claim_many(ARRAY(SELECT id FROM jobs.job WHERE kind = $1 AND payload ? 'sample'), 'w') LOOP
        o := jobs.fail(l.job_id, 'w', l.lease_version, 'sample');
        INSERT INTO delays VALUES ($1, $2, o.run_after - now());
    END LOOP;
END $$;
DO $$ BEGIN
    PERFORM jobs.submit('tc.rb', jsonb_build_object('sample', i), notify => false) FROM generate_series(1, 60) AS i;
    PERFORM jobs.submit('tc.rbcap', jsonb_build_object('sample', i), notify => false) FROM generate_series(1, 60) AS i;
    PERFORM pg_temp.fail_all('tc.rb', 1);    PERFORM pg_temp.fail_all('tc.rbcap', 1);
    PERFORM pg_temp.fail_all('tc.rb', 2);    PERFORM pg_temp.fail_all('tc.rbcap', 2);
    PERFORM pg_temp.fail_all('tc.rb', 3);    PERFORM pg_temp.fail_all('tc.rbcap', 3);
END $$;
SELECT results_eq($$ SELECT kind, retry_count, count(*) FROM delays GROUP BY 1, 2 ORDER BY 1, 2 $$,
    $$ VALUES ('tc.rb'::text, 1, 60::bigint), ('tc.rb', 2, 60), ('tc.rb', 3, 60), ('tc.rbcap', 1, 60), ('tc.rbcap', 2, 60), ('tc.rbcap', 3, 60) $$,
    'retry_budget: backoff samples -> 60 requeued jobs per kind and retry_count');
SELECT is_empty($$ SELECT * FROM delays WHERE kind = 'tc.rb' AND retry_count = 1 AND delay NOT BETWEEN interval '500 ms' AND interval '1 s' $$,
    'retry_budget: base 1 s, retry 1 -> d = 1 s, every delay within [0.5 s, 1 s]');
SELECT is_empty($$ SELECT * FROM delays WHERE kind = 'tc.rb' AND retry_count = 2 AND delay NOT BETWEEN interval '1 s' AND interval '2 s' $$,
    'retry_budget: base 1 s, retry 2 -> d = 2 s, every delay within [1 s, 2 s]');
SELECT is_empty($$ SELECT * FROM delays WHERE kind = 'tc.rb' AND retry_count = 3 AND delay NOT BETWEEN interval '2 s' AND interval '4 s' $$,
    'retry_budget: base 1 s, retry 3 -> d = 4 s, every delay within [2 s, 4 s]');
SELECT is_empty($$ SELECT * FROM delays WHERE kind = 'tc.rbcap' AND retry_count = 1 AND delay NOT BETWEEN interval '5 s' AND interval '10 s' $$,
    'retry_budget: base 10 s, cap 15 s, retry 1 -> d = 10 s, every delay within [5 s, 10 s]');
SELECT is_empty($$ SELECT * FROM delays WHERE kind = 'tc.rbcap' AND retry_count = 2 AND delay NOT BETWEEN interval '7.5 s' AND interval '15 s' $$,
    'retry_budget: base 10 s, cap 15 s, retry 2 -> d = least(15 s, 20 s) = 15 s, every delay within [7.5 s, 15 s]');
SELECT is_empty($$ SELECT * FROM delays WHERE kind = 'tc.rbcap' AND retry_count = 3 AND delay NOT BETWEEN interval '7.5 s' AND interval '15 s' $$,
    'retry_budget: base 10 s, cap 15 s, retry 3 -> capped d = 15 s, every delay within [7.5 s, 15 s]');
SELECT ok((SELECT count(DISTINCT delay) > 10 FROM delays WHERE kind = 'tc.rb' AND retry_count = 2),
    'retry_budget: delays are jittered (60 samples are not all alike)');
SELECT ok((SELECT min(delay) < interval '1.5 s' AND max(delay) > interval '1.5 s' FROM delays WHERE kind = 'tc.rb' AND retry_count = 2),
    'retry_budget: jitter spreads over the whole [d/2, d] range, not one end');
SELECT ok((SELECT min(delay) < interval '11.25 s' AND max(delay) > interval '11.25 s' FROM delays WHERE kind = 'tc.rbcap' AND retry_count = 3),
    'retry_budget: capped delays also spread over [d/2, d]');

-- the default cap (5 min) and a retry count large enough to overflow an unguarded 2^n
DO $$ BEGIN
    PERFORM pg_temp.running('big', 'tc.rbbig', 'w');
    UPDATE jobs.job SET retry_count = 9 WHERE id = pg_temp.id('big');       -- this failure is the 10th: 2^9 s > 5 min
    PERFORM pg_temp.running('huge', 'tc.rbbig', 'w');
    UPDATE jobs.job SET retry_count = 998 WHERE id = pg_temp.id('huge');    -- the 999th failure
END $$;
SELECT ok((SELECT run_after - now() BETWEEN interval '150 s' AND interval '300 s' FROM jobs.fail(pg_temp.id('big'), 'w', 1, 'x')),
    'retry_budget: default cap, retry 10 -> d = least(5 min, 512 s) = 5 min, delay within [150 s, 300 s]');
SELECT ok((SELECT status = 'queued' AND run_after - now() BETWEEN interval '150 s' AND interval '300 s' FROM jobs.fail(pg_temp.id('huge'), 'w', 1, 'x')),
    'retry_budget: retry 999 of 1000 -> requeued, delay still capped at 5 min (no overflow)');

-- Compared in seconds, as the function computes: interval comparison counts a month as 30
-- days, so '1000 years' reads shorter than its 365.25-day-year epoch value.
SELECT ok(extract(epoch FROM jobs.backoff_delay(60, '100 years', '1000 years'))
              BETWEEN extract(epoch FROM interval '500 years') AND extract(epoch FROM interval '1000 years'),
    'retry_budget: a huge base and retry count stay within the cap instead of overflowing the interval');

SELECT * FROM finish();
ROLLBACK;
