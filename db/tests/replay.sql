-- pgTAP tests for jobs.replay(job_id): dead-letter re-drive, failed -> queued; done -> false (no-op); others JB003.
-- Contract: docs/design.md §2 (failed -> queued: retry_count = 0, lease_version += 1), §3 (reason replayed),
-- §4 (replay RETURNS boolean), §5 (JB002, JB003), §8.4, docs/decisions.md (fan-in counter).
BEGIN;
SELECT plan(33);
-- Shared helpers (temporary objects, gone with the ROLLBACK).
\ir helpers/lease_helpers.psql

DO $$ BEGIN
    PERFORM jobs.define_type('tc.replay', max_retries => 1);
    PERFORM pg_temp.running('f', 'tc.replay', 'w1');
    PERFORM jobs.fail(pg_temp.id('f'), 'w1', 1, 'first');
    UPDATE jobs.job SET run_after = now() WHERE id = pg_temp.id('f');
    PERFORM jobs.claim(pg_temp.id('f'), 'w2');
    PERFORM jobs.fail(pg_temp.id('f'), 'w2', 3, 'second');            -- exhausted: failed, lease_version 3
END $$;

SELECT is((SELECT (status, retry_count, lease_version)::text FROM jobs.job WHERE id = pg_temp.id('f')), '(failed,2,3)',
    'replay: setup -> job exhausted its budget (failed, retry_count 2, lease_version 3)');
SELECT is(jobs.replay(pg_temp.id('f')), true, 'replay: failed job -> true');
SELECT results_eq(
    $$ SELECT status, retry_count, lease_version, run_after, finished_at, owned_by, claimed_at, lease_expires_at, cancel_requested_at, result, error
         FROM jobs.job WHERE id = pg_temp.id('f') $$,
    $$ VALUES ('queued'::jobs.status, 0, 4::bigint, now(), NULL::timestamptz, NULL::text, NULL::timestamptz, NULL::timestamptz,
               NULL::timestamptz, NULL::jsonb, 'second'::text) $$,
    'replay: row -> queued now, retry_count 0, lease_version 4, finished_at cleared, latest error kept');
SELECT is(pg_temp.last_event(pg_temp.id('f')), '(failed,queued,4,,replayed,second)', 'replay: logs failed -> queued, lease_version 4, replayed');
SELECT results_eq($$ SELECT lease_version, attempt FROM jobs.claim(pg_temp.id('f'), 'w3') $$, $$ VALUES (5::bigint, 1) $$,
    'replay: replayed job is claimable at once, attempt 1 again');
SELECT is((jobs.fail(pg_temp.id('f'), 'w3', 5, 'third')).status, 'queued'::jobs.status, 'replay: fresh retry budget -> the next failure is retried');
SELECT throws_ok($$ SELECT jobs.complete(pg_temp.id('f'), 'w2', 3) $$, 'JB001', NULL, 'replay: a lease from before the replay stays fenced out -> JB001');

-- not failed: JB003 (queued, processing, enqueue_failed), done: false; nothing written
DO $$ BEGIN
    PERFORM pg_temp.snap(pg_temp.id('f'));
    PERFORM pg_temp.running('p', 'tc.replay', 'w1');
    PERFORM pg_temp.snap(pg_temp.id('p'));
    PERFORM pg_temp.job('ef', 'tc.replay');
    PERFORM jobs.mark_enqueue_failed(ARRAY[pg_temp.id('ef')]);
    PERFORM pg_temp.snap(pg_temp.id('ef'));
    PERFORM pg_temp.running('d', 'tc.replay', 'w1');
    PERFORM jobs.complete(pg_temp.id('d'), 'w1', 1, '{"ok": true}');
    PERFORM pg_temp.snap(pg_temp.id('d'));
END $$;
SELECT throws_ok($$ SELECT jobs.replay(pg_temp.id('f')) $$, 'JB003', NULL, 'replay: queued job -> JB003');
SELECT is(pg_temp.state(pg_temp.id('f')), pg_temp.snapped(pg_temp.id('f')), 'replay: queued job -> row and events unchanged');
SELECT throws_ok($$ SELECT jobs.replay(pg_temp.id('p')) $$, 'JB003', NULL, 'replay: processing job -> JB003');
SELECT is(pg_temp.state(pg_temp.id('p')), pg_temp.snapped(pg_temp.id('p')), 'replay: processing job -> row and events unchanged');
SELECT throws_ok($$ SELECT jobs.replay(pg_temp.id('ef')) $$, 'JB003', NULL, 'replay: enqueue_failed job -> JB003');
SELECT is(pg_temp.state(pg_temp.id('ef')), pg_temp.snapped(pg_temp.id('ef')), 'replay: enqueue_failed job -> row and events unchanged');
SELECT is(jobs.replay(pg_temp.id('d')), false, 'replay: done job -> false');
SELECT is(pg_temp.state(pg_temp.id('d')), pg_temp.snapped(pg_temp.id('d')), 'replay: done job -> no-op, row and events unchanged');
SELECT is(jobs.replay(pg_temp.id('d')), false, 'replay: done job again -> false');
SELECT throws_ok($$ SELECT jobs.replay(-42) $$, 'JB002', NULL, 'replay: unknown job -> JB002');

-- replay twice: the second is on a queued job
DO $$ BEGIN PERFORM pg_temp.job('c', 'tc.replay'); PERFORM jobs.cancel(pg_temp.id('c')); END $$;
SELECT is(jobs.replay(pg_temp.id('c')), true, 'replay: cancelled (failed) job -> true');
SELECT pg_temp.snap(pg_temp.id('c'));
SELECT throws_ok($$ SELECT jobs.replay(pg_temp.id('c')) $$, 'JB003', NULL, 'replay: second replay of the same job -> JB003');
SELECT is(pg_temp.state(pg_temp.id('c')), pg_temp.snapped(pg_temp.id('c')), 'replay: second replay -> row and events unchanged');

-- a job cancelled while running: the cancel flag does not survive the replay
DO $$ BEGIN
    PERFORM pg_temp.running('cr', 'tc.replay', 'w1');
    PERFORM jobs.cancel(pg_temp.id('cr'));
    PERFORM jobs.fail(pg_temp.id('cr'), 'w1', 1, 'stopped');
END $$;
SELECT is(jobs.replay(pg_temp.id('cr')), true, 'replay: job failed on a cancel request -> true');
SELECT is((SELECT cancel_requested_at FROM jobs.job WHERE id = pg_temp.id('cr')), NULL::timestamptz, 'replay: cancel request cleared');
SELECT results_eq($$ SELECT alive, cancel_requested FROM jobs.heartbeat(pg_temp.id('cr'), 'w1', (SELECT lease_version FROM jobs.claim(pg_temp.id('cr'), 'w1'))) $$,
    $$ VALUES (true, false) $$, 'replay: the new attempt is not told to cancel');

-- fan-in: a replayed child makes an unrun coordinator wait again
DO $$ BEGIN
    INSERT INTO ids SELECT 'coord', (jobs.fan_out('[{"kind": "tc.replay"}, {"kind": "tc.replay"}]', '{"kind": "tc.replay"}')).id;
    INSERT INTO ids SELECT 'child' || row_number() OVER (ORDER BY j.id), j.id FROM jobs.job AS j WHERE j.parent_id = pg_temp.id('coord');
    PERFORM jobs.cancel(pg_temp.id('child1'));
    PERFORM jobs.cancel(pg_temp.id('child2'));
END $$;
SELECT is((SELECT pending_children FROM jobs.job WHERE id = pg_temp.id('coord')), 0, 'replay: setup -> both children ended, coordinator pending_children 0');
SELECT is(jobs.replay(pg_temp.id('child1')), true, 'replay: failed child -> true');
SELECT is((SELECT pending_children FROM jobs.job WHERE id = pg_temp.id('coord')), 1, 'replay: replayed child counts as pending again');
SELECT is_empty($$ SELECT * FROM jobs.claim(pg_temp.id('coord'), 'w1') $$, 'replay: coordinator waits for the replayed child');
SELECT is((jobs.complete(pg_temp.id('child1'), 'w1', (SELECT lease_version FROM jobs.claim(pg_temp.id('child1'), 'w1')))).wake,
    ARRAY[pg_temp.id('coord')], 'replay: replayed child ends -> wakes the coordinator once more');

-- ordering key: a replayed older job is the head again
DO $$ BEGIN
    PERFORM pg_temp.job('o1', 'tc.replay', '{}', NULL, 'replay:key');
    PERFORM pg_temp.job('o2', 'tc.replay', '{}', NULL, 'replay:key');
    PERFORM jobs.cancel(pg_temp.id('o1'));
    PERFORM jobs.replay(pg_temp.id('o1'));
END $$;
SELECT is_empty($$ SELECT * FROM jobs.claim(pg_temp.id('o2'), 'w1') $$, 'replay: replayed older job of an ordering key blocks its successor again');

SELECT is(pg_temp.error_of('SELECT jobs.replay(-42)'), 'JB002 jobs.replay hint=true',
    'replay: the JB002 message names jobs.replay and carries a HINT');
SELECT is(pg_temp.error_of(format('SELECT jobs.replay(%s)', pg_temp.id('p'))), 'JB003 jobs.replay hint=true',
    'replay: the JB003 message names jobs.replay and carries a HINT');

-- roles: replay is an admin task
SET LOCAL ROLE jobs_worker;
SELECT throws_ok($$ SELECT jobs.replay(1) $$, '42501', NULL, 'replay: jobs_worker may not replay -> 42501');
RESET ROLE;
SET LOCAL ROLE jobs_producer;
SELECT throws_ok($$ SELECT jobs.replay(1) $$, '42501', NULL, 'replay: jobs_producer may not replay -> 42501');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
