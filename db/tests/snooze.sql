-- pgTAP tests for jobs.snooze and jobs.snooze_many: processing -> queued after a delay,
-- fenced like complete, the retry budget untouched, bounded by jobs.max_snoozes().
-- Contract: docs/sql-api.md "snooze", "snooze_many", "Leaving processing".
BEGIN;
SELECT plan(25);
\ir helpers/lease_helpers.psql

DO $$ BEGIN
    PERFORM jobs.define_type('tc.snooze', max_retries => 2);
    PERFORM pg_temp.running('s', 'tc.snooze', 'w1');
END $$;

SELECT results_eq($$ SELECT accepted, status, run_after FROM jobs.snooze(pg_temp.id('s'), 'w1', 1, interval '30 seconds') $$,
    $$ VALUES (true, 'queued'::jobs.status, now() + interval '30 seconds') $$,
    'snooze: accepted, queued again, due after the delay');
SELECT results_eq($$ SELECT status, retry_count, snoozes, lease_version, owned_by, claimed_at, lease_expires_at
                       FROM jobs.job WHERE id = pg_temp.id('s') $$,
    $$ VALUES ('queued'::jobs.status, 0, 1, 2::bigint, NULL::text, NULL::timestamptz, NULL::timestamptz) $$,
    'snooze: retry_count unchanged, snoozes 1, lease_version bumped, lease cleared');
SELECT is(pg_temp.last_event(pg_temp.id('s')), '(processing,queued,2,w1,snoozed,)',
    'snooze: logs processing -> queued, lease_version 2, reason snoozed, no error');
SELECT is((SELECT count(*) FROM jobs.claim(pg_temp.id('s'), 'w2')), 0::bigint, 'snooze: not claimable before the delay');
SELECT throws_ok($$ SELECT jobs.complete(pg_temp.id('s'), 'w1', 1) $$, 'JB001', NULL,
    'snooze: the snoozed lease is fenced out -> JB001');
SELECT throws_ok($$ SELECT jobs.snooze(pg_temp.id('s'), 'w1', 1, interval '1 second') $$, 'JB001', NULL,
    'snooze: a second snooze on the ended lease -> JB001');

-- after the delay: claimable again, attempt counts only real attempts
DO $$ BEGIN PERFORM pg_temp.elapse(pg_temp.id('s'), interval '31 seconds'); END $$;
SELECT results_eq($$ SELECT lease_version, attempt FROM jobs.claim(pg_temp.id('s'), 'w2') $$, $$ VALUES (3::bigint, 1) $$,
    'snooze: claimable after the delay, still attempt 1');
SELECT is((jobs.fail(pg_temp.id('s'), 'w2', 3, 'boom')).status, 'queued'::jobs.status,
    'snooze: the retry budget is whole: a failure after a snooze is retried');

-- the error of the last real failure is kept across a snooze
DO $$ BEGIN
    UPDATE jobs.job SET run_after = now() WHERE id = pg_temp.id('s');
    PERFORM jobs.claim(pg_temp.id('s'), 'w3');
    PERFORM jobs.snooze(pg_temp.id('s'), 'w3', 5, interval '0');
END $$;
SELECT results_eq($$ SELECT status, error, retry_count, snoozes, run_after FROM jobs.job WHERE id = pg_temp.id('s') $$,
    $$ VALUES ('queued'::jobs.status, 'boom'::text, 1, 2, now()) $$,
    'snooze: delay 0 -> due now; the last failure''s error and retry_count kept; snoozes 2');

-- bad delays: 22023, nothing written
DO $$ BEGIN
    UPDATE jobs.job SET run_after = now() WHERE id = pg_temp.id('s');
    PERFORM jobs.claim(pg_temp.id('s'), 'w4');
    PERFORM pg_temp.snap(pg_temp.id('s'));
END $$;
SELECT throws_ok($$ SELECT jobs.snooze(pg_temp.id('s'), 'w4', 7, interval '-1 second') $$, '22023', NULL, 'snooze: negative delay -> 22023');
SELECT throws_ok($$ SELECT jobs.snooze(pg_temp.id('s'), 'w4', 7, NULL) $$, '22023', NULL, 'snooze: NULL delay -> 22023');
SELECT throws_ok($$ SELECT jobs.snooze(pg_temp.id('s'), 'w4', 7, interval '31 days') $$, '22023', NULL, 'snooze: delay over 30 days -> 22023');
SELECT throws_ok($$ SELECT jobs.snooze(pg_temp.id('s'), 'w4', 7, interval '1 second', gen_random_uuid()) $$, 'JB001', NULL,
    'snooze: a wrong lease token -> JB001');
SELECT is(pg_temp.state(pg_temp.id('s')), pg_temp.snapped(pg_temp.id('s')), 'snooze: refused snoozes wrote nothing');
SELECT throws_ok($$ SELECT jobs.snooze(pg_temp.id('s'), '', 7, interval '1 second') $$, '22023', NULL, 'snooze: empty worker -> 22023');

-- a cancel request wins over a snooze
DO $$ BEGIN PERFORM jobs.cancel(pg_temp.id('s'), 'no longer wanted'); END $$;
SELECT is((jobs.snooze(pg_temp.id('s'), 'w4', 7, interval '1 second')).status, 'failed'::jobs.status,
    'snooze: cancel requested -> the snooze ends the job failed');
SELECT is((SELECT reason FROM jobs.history WHERE job_id = pg_temp.id('s') ORDER BY id DESC LIMIT 1), 'cancelled',
    'snooze: ... with reason cancelled');

-- the bound: the snooze past jobs.max_snoozes() fails the job
DO $$ BEGIN
    PERFORM pg_temp.running('b', 'tc.snooze', 'w1');
    UPDATE jobs.job SET snoozes = jobs.max_snoozes() WHERE id = pg_temp.id('b');
END $$;
SELECT results_eq($$ SELECT accepted, status FROM jobs.snooze(pg_temp.id('b'), 'w1', 1, interval '1 second') $$,
    $$ VALUES (true, 'failed'::jobs.status) $$, 'snooze: past the bound -> failed (a dead letter someone sees)');
SELECT matches((SELECT error FROM jobs.job WHERE id = pg_temp.id('b')), '^snoozed 100 times',
    'snooze: ... with an error that says why');
SELECT is((SELECT reason FROM jobs.history WHERE job_id = pg_temp.id('b') ORDER BY id DESC LIMIT 1), 'failed',
    'snooze: ... reason failed');
SELECT is(jobs.replay(pg_temp.id('b')), true, 'snooze: the dead letter can be replayed');
SELECT is((SELECT snoozes FROM jobs.job WHERE id = pg_temp.id('b')), 0, 'snooze: replay resets the snooze count');

-- snooze_many: per-item outcomes, a lost lease is accepted = false
DO $$ BEGIN
    PERFORM pg_temp.running('m1', 'tc.snooze', 'w9');
    PERFORM pg_temp.running('m2', 'tc.snooze', 'w9');
END $$;
SELECT results_eq(
    $$ SELECT job_id, accepted, status FROM jobs.snooze_many(ARRAY[pg_temp.id('m1'), pg_temp.id('m2')], 'w9', ARRAY[1, 99]::bigint[],
                                                             ARRAY[interval '5 seconds', interval '5 seconds']) $$,
    $$ VALUES (pg_temp.id('m1'), true, 'queued'::jobs.status), (pg_temp.id('m2'), false, 'processing'::jobs.status) $$,
    'snooze_many: one outcome per item; the item without its lease is refused');
SELECT throws_ok($$ SELECT * FROM jobs.snooze_many(ARRAY[1, 2]::bigint[], 'w9', ARRAY[1]::bigint[], ARRAY[interval '1 second']) $$,
    '22023', NULL, 'snooze_many: arrays of different lengths -> 22023');
SELECT is_empty($$ SELECT * FROM jobs.audit() WHERE violations > 0 $$, 'snooze: jobs.audit finds every snooze legal');

SELECT * FROM finish();
ROLLBACK;
