-- pgTAP tests for jobs.fail(job_id, worker, lease_version, error, retryable): processing -> queued (budget left) or failed.
-- Contract: docs/design.md §2 (retry rule, authority predicate), §3 (reasons retried/exhausted/failed/cancelled),
-- §4 (cancel honoured even when retryable, outcome.wake), §5, §8.
BEGIN;
SELECT plan(47);
-- Shared helpers (temporary objects, gone with the ROLLBACK).
\ir helpers/lease_helpers.psql

DO $$ BEGIN
    PERFORM jobs.define_type('tc.fail', max_retries => 3, backoff_base => '1 second', backoff_max => '5 minutes');
    PERFORM jobs.define_type('tc.fail0', max_retries => 0);
    PERFORM pg_temp.running('a', 'tc.fail', 'w1');
END $$;

CREATE TEMP TABLE o_a AS SELECT * FROM jobs.fail(pg_temp.id('a'), 'w1', 1, 'HTTP 503');
SELECT results_eq($$ SELECT job_id, accepted, status, wake FROM o_a $$,
    $$ VALUES (pg_temp.id('a'), true, 'queued'::jobs.status, '{}'::bigint[]) $$,
    'fail: retryable failure with budget left -> accepted, back to queued, empty wake');
SELECT ok((SELECT run_after BETWEEN now() + interval '500 milliseconds' AND now() + interval '1 second' FROM o_a),
    'fail: first retry due after backoff d/2 <= delay <= d with d = base = 1 s');
SELECT results_eq(
    $$ SELECT status, retry_count, error, result, owned_by, claimed_at, lease_expires_at, lease_version, finished_at, run_after
         FROM jobs.job WHERE id = pg_temp.id('a') $$,
    $$ SELECT 'queued'::jobs.status, 1, 'HTTP 503'::text, NULL::jsonb, NULL::text, NULL::timestamptz, NULL::timestamptz, 2::bigint,
              NULL::timestamptz, o.run_after FROM o_a AS o $$,
    'fail: requeued row -> retry_count 1, error kept, owner/claim/lease cleared, lease_version 2, run_after = outcome.run_after');
SELECT is(pg_temp.last_event(pg_temp.id('a')), '(processing,queued,2,w1,retried,"HTTP 503")',
    'fail: logs processing -> queued, lease_version 2, worker, retried, error');
SELECT is_empty($$ SELECT * FROM jobs.claim(pg_temp.id('a'), 'w2') $$, 'fail: requeued job is not claimable before its backoff ends');
SELECT pg_temp.snap(pg_temp.id('a'));
SELECT throws_ok($$ SELECT jobs.fail(pg_temp.id('a'), 'w1', 1, 'HTTP 503') $$, 'JB001', NULL, 'fail: repeated fail with the old lease -> JB001');
SELECT is(pg_temp.state(pg_temp.id('a')), pg_temp.snapped(pg_temp.id('a')), 'fail: repeated fail -> row and events unchanged');
SELECT throws_ok($$ SELECT jobs.fail(pg_temp.id('a'), 'w1', 2, 'HTTP 503') $$, 'JB001', NULL, 'fail: queued job, current lease_version but not processing -> JB001');
SELECT is(pg_temp.state(pg_temp.id('a')), pg_temp.snapped(pg_temp.id('a')), 'fail: queued job -> row and events unchanged');

-- budget spent
DO $$ BEGIN PERFORM pg_temp.running('z', 'tc.fail0', 'w1'); END $$;
SELECT results_eq($$ SELECT job_id, accepted, status, wake FROM jobs.fail(pg_temp.id('z'), 'w1', 1, 'boom') $$,
    $$ VALUES (pg_temp.id('z'), true, 'failed'::jobs.status, '{}'::bigint[]) $$,
    'fail: max_retries 0, retryable -> failed at once');
SELECT results_eq(
    $$ SELECT status, retry_count, error, owned_by, claimed_at, lease_expires_at, lease_version, finished_at FROM jobs.job WHERE id = pg_temp.id('z') $$,
    $$ VALUES ('failed'::jobs.status, 1, 'boom'::text, NULL::text, NULL::timestamptz, NULL::timestamptz, 1::bigint, now()) $$,
    'fail: exhausted row -> failed, retry_count 1, finished_at now, owner cleared, lease_version unchanged');
SELECT is(pg_temp.last_event(pg_temp.id('z')), '(processing,failed,1,w1,exhausted,boom)', 'fail: logs processing -> failed, exhausted');

-- not retryable
DO $$ BEGIN PERFORM pg_temp.running('n', 'tc.fail', 'w1'); END $$;
SELECT results_eq($$ SELECT accepted, status FROM jobs.fail(pg_temp.id('n'), 'w1', 1, 'invalid card', retryable => false) $$,
    $$ VALUES (true, 'failed'::jobs.status) $$, 'fail: retryable false with budget left -> failed');
SELECT results_eq($$ SELECT retry_count, error, lease_version, finished_at FROM jobs.job WHERE id = pg_temp.id('n') $$,
    $$ VALUES (1, 'invalid card'::text, 1::bigint, now()) $$, 'fail: non-retryable row -> retry_count counts the attempt, lease_version unchanged');
SELECT is(pg_temp.last_event(pg_temp.id('n')), '(processing,failed,1,w1,failed,"invalid card")', 'fail: logs processing -> failed, reason failed');

-- cancel requested: failed even when retryable
DO $$ BEGIN PERFORM pg_temp.running('c', 'tc.fail', 'w1'); PERFORM jobs.cancel(pg_temp.id('c'), 'user asked'); END $$;
SELECT results_eq($$ SELECT accepted, status FROM jobs.fail(pg_temp.id('c'), 'w1', 1, 'stopped on cancel') $$,
    $$ VALUES (true, 'failed'::jobs.status) $$, 'fail: cancel requested, retryable true -> failed, not requeued');
SELECT is(pg_temp.last_event(pg_temp.id('c')), '(processing,failed,1,w1,cancelled,"stopped on cancel")',
    'fail: cancel honoured -> reason cancelled, the worker''s error');
SELECT results_eq($$ SELECT error, retry_count, finished_at FROM jobs.job WHERE id = pg_temp.id('c') $$,
    $$ VALUES ('stopped on cancel'::text, 1, now()) $$, 'fail: cancelled row -> error is the worker''s, finished_at now');
DO $$ BEGIN PERFORM pg_temp.running('c2', 'tc.fail', 'w1'); PERFORM jobs.cancel(pg_temp.id('c2')); END $$;
SELECT is((jobs.fail(pg_temp.id('c2'), 'w1', 1, 'stopped', retryable => false)).status, 'failed'::jobs.status,
    'fail: cancel requested, retryable false -> failed');
SELECT is((SELECT reason FROM jobs.history WHERE job_id = pg_temp.id('c2') ORDER BY id DESC LIMIT 1), 'cancelled',
    'fail: cancel requested, retryable false -> reason cancelled');

-- authority predicate
DO $$ BEGIN PERFORM pg_temp.running('s', 'tc.fail', 'w1'); PERFORM pg_temp.snap(pg_temp.id('s')); END $$;
SELECT throws_ok($$ SELECT jobs.fail(pg_temp.id('s'), 'w1', 0, 'x') $$, 'JB001', NULL, 'fail: stale lease_version -> JB001');
SELECT throws_ok($$ SELECT jobs.fail(pg_temp.id('s'), 'w1', 2, 'x') $$, 'JB001', NULL, 'fail: future lease_version -> JB001');
SELECT throws_ok($$ SELECT jobs.fail(pg_temp.id('s'), 'w2', 1, 'x') $$, 'JB001', NULL, 'fail: another worker -> JB001');
SELECT is(pg_temp.state(pg_temp.id('s')), pg_temp.snapped(pg_temp.id('s')), 'fail: rejected lease -> row and events unchanged');
DO $$ BEGIN
    PERFORM pg_temp.running('d', 'tc.fail', 'w1');
    PERFORM jobs.complete(pg_temp.id('d'), 'w1', 1, '{"ok": 1}');
    PERFORM pg_temp.snap(pg_temp.id('d'));
    PERFORM pg_temp.snap(pg_temp.id('z'));
END $$;
SELECT throws_ok($$ SELECT jobs.fail(pg_temp.id('d'), 'w1', 1, 'x') $$, 'JB001', NULL, 'fail: done job -> JB001');
SELECT is(pg_temp.state(pg_temp.id('d')), pg_temp.snapped(pg_temp.id('d')), 'fail: done job -> row unchanged, result kept');
SELECT throws_ok($$ SELECT jobs.fail(pg_temp.id('z'), 'w1', 1, 'x') $$, 'JB001', NULL, 'fail: failed job -> JB001');
SELECT is(pg_temp.state(pg_temp.id('z')), pg_temp.snapped(pg_temp.id('z')), 'fail: failed job -> row unchanged');
SELECT throws_ok($$ SELECT jobs.fail(-42, 'w1', 1, 'x') $$, 'JB002', NULL, 'fail: unknown job -> JB002');

-- reaped, then the old owner fails
DO $$ BEGIN
    PERFORM pg_temp.running('r', 'tc.fail', 'w1');
    PERFORM pg_temp.elapse(pg_temp.id('r'), '16 seconds');
    PERFORM jobs.reap();
    PERFORM pg_temp.snap(pg_temp.id('r'));
END $$;
SELECT throws_ok($$ SELECT jobs.fail(pg_temp.id('r'), 'w1', 1, 'x') $$, 'JB001', NULL, 'fail: reaped job, old lease -> JB001');
SELECT is(pg_temp.state(pg_temp.id('r')), pg_temp.snapped(pg_temp.id('r')), 'fail: reaped job -> row unchanged');

-- expired but unreaped lease still holds
DO $$ BEGIN PERFORM pg_temp.running('x', 'tc.fail', 'w1'); PERFORM pg_temp.elapse(pg_temp.id('x'), '40 seconds'); END $$;
SELECT results_eq($$ SELECT accepted, status FROM jobs.fail(pg_temp.id('x'), 'w1', 1, 'timeout') $$,
    $$ VALUES (true, 'queued'::jobs.status) $$, 'fail: expired but unreaped lease (worker reports timeout) -> accepted, requeued');

-- bad input: 22023, nothing written
SELECT throws_ok($$ SELECT jobs.fail(pg_temp.id('s'), 'w1', 1, '') $$, '22023', NULL, 'fail: empty error -> 22023');
SELECT throws_ok($$ SELECT jobs.fail(pg_temp.id('s'), 'w1', 1, '  ') $$, '22023', NULL, 'fail: blank error -> 22023');
SELECT throws_ok($$ SELECT jobs.fail(pg_temp.id('s'), 'w1', 1, NULL) $$, '22023', NULL, 'fail: NULL error -> 22023');
SELECT throws_ok($$ SELECT jobs.fail(pg_temp.id('s'), 'w1', 1, 'x', NULL) $$, '22023', NULL, 'fail: NULL retryable -> 22023');
SELECT throws_ok($$ SELECT jobs.fail(pg_temp.id('s'), '', 1, 'x') $$, '22023', NULL, 'fail: empty worker -> 22023');
SELECT throws_ok($$ SELECT jobs.fail(pg_temp.id('s'), NULL, 1, 'x') $$, '22023', NULL, 'fail: NULL worker -> 22023');
SELECT is(pg_temp.state(pg_temp.id('s')), pg_temp.snapped(pg_temp.id('s')), 'fail: rejected input -> row and events unchanged');

-- wake: only when the job ends
DO $$ BEGIN
    PERFORM pg_temp.job('o1', 'tc.fail', '{}', NULL, 'fail:key');
    PERFORM pg_temp.job('o2', 'tc.fail', '{}', NULL, 'fail:key');
    PERFORM jobs.claim(pg_temp.id('o1'), 'w1');
END $$;
SELECT is((jobs.fail(pg_temp.id('o1'), 'w1', 1, 'again')).wake, '{}'::bigint[], 'fail: requeued ordering-key head -> empty wake');
SELECT is_empty($$ SELECT * FROM jobs.claim(pg_temp.id('o2'), 'w1') $$, 'fail: successor stays blocked while its requeued predecessor waits');
DO $$ BEGIN UPDATE jobs.job SET run_after = now() WHERE id = pg_temp.id('o1'); PERFORM jobs.claim(pg_temp.id('o1'), 'w1'); END $$;
SELECT is((jobs.fail(pg_temp.id('o1'), 'w1', 3, 'fatal', retryable => false)).wake, ARRAY[pg_temp.id('o2')],
    'fail: ordering-key head fails for good -> wake lists the successor');
DO $$ BEGIN
    INSERT INTO ids SELECT 'coord', (jobs.fan_out('[{"kind": "tc.fail0"}]', '{"kind": "tc.fail"}')).id;
    INSERT INTO ids SELECT 'child', j.id FROM jobs.job AS j WHERE j.parent_id = pg_temp.id('coord');
    PERFORM jobs.claim(pg_temp.id('child'), 'w1');
END $$;
SELECT is((jobs.fail(pg_temp.id('child'), 'w1', 1, 'boom')).wake, ARRAY[pg_temp.id('coord')],
    'fail: last child exhausted -> wake lists the coordinator (a failed child also ends it)');

SELECT is(pg_temp.error_of(format('SELECT jobs.fail(%s, %L, 0, %L)', pg_temp.id('s'), 'w1', 'x')), 'JB001 jobs.fail hint=true',
    'fail: the JB001 message names jobs.fail and carries a HINT');
SELECT is(pg_temp.error_of('SELECT jobs.fail(-42, ''w1'', 1, ''x'')'), 'JB002 jobs.fail hint=true',
    'fail: the JB002 message names jobs.fail and carries a HINT');
SELECT is(pg_temp.error_of('SELECT jobs.fail(-42, ''w1'', 1, '''')'), '22023 jobs.fail hint=true',
    'fail: the 22023 message names jobs.fail and carries a HINT');

-- roles
SET LOCAL ROLE jobs_producer;
SELECT throws_ok($$ SELECT jobs.fail(1, 'w1', 1, 'x') $$, '42501', NULL, 'fail: jobs_producer may not fail -> 42501');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
