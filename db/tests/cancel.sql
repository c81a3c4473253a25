-- pgTAP tests for jobs.cancel(job_id, reason): queued/enqueue_failed -> failed; processing -> flag only; terminal -> no-op.
-- Contract: docs/design.md §2 (queued / enqueue_failed -> failed by cancel; cancel honoured), §3 (reasons
-- cancelled, cancel_requested), §4 (cancel semantics, outcome), §5 (JB002), docs/decisions.md (repeat cancel).
BEGIN;
SELECT plan(31);
-- Shared helpers (temporary objects, gone with the ROLLBACK).
\ir helpers/lease_helpers.psql

DO $$ BEGIN
    PERFORM jobs.define_type('tc.cancel', max_retries => 3);
    PERFORM pg_temp.job('q', 'tc.cancel');
END $$;

SELECT results_eq($$ SELECT * FROM jobs.cancel(pg_temp.id('q')) $$,
    $$ VALUES (pg_temp.id('q'), true, 'failed'::jobs.status, now(), '{}'::bigint[]) $$,
    'cancel: queued job -> accepted, failed at once, empty wake');
SELECT results_eq($$ SELECT status, error, finished_at, lease_version, retry_count, owned_by FROM jobs.job WHERE id = pg_temp.id('q') $$,
    $$ VALUES ('failed'::jobs.status, 'cancelled'::text, now(), 0::bigint, 0, NULL::text) $$,
    'cancel: queued row -> failed, error cancelled, finished_at now, lease_version unchanged');
SELECT is(pg_temp.last_event(pg_temp.id('q')), '(queued,failed,0,,cancelled,cancelled)', 'cancel: logs queued -> failed, reason cancelled');
SELECT is_empty($$ SELECT * FROM jobs.claim(pg_temp.id('q'), 'w1') $$, 'cancel: a cancelled job is not claimable');

-- custom reason, enqueue_failed, not-due
DO $$ BEGIN
    PERFORM pg_temp.job('ef', 'tc.cancel');
    PERFORM jobs.mark_enqueue_failed(ARRAY[pg_temp.id('ef')]);
    PERFORM pg_temp.job('later', 'tc.cancel', '{}', now() + interval '1 hour');
END $$;
SELECT results_eq($$ SELECT accepted, status FROM jobs.cancel(pg_temp.id('ef'), 'customer closed the account') $$,
    $$ VALUES (true, 'failed'::jobs.status) $$, 'cancel: enqueue_failed job -> accepted, failed');
SELECT is(pg_temp.last_event(pg_temp.id('ef')), '(enqueue_failed,failed,0,,cancelled,"customer closed the account")',
    'cancel: logs enqueue_failed -> failed, reason cancelled, the given reason as error');
SELECT is((SELECT error FROM jobs.job WHERE id = pg_temp.id('ef')), 'customer closed the account', 'cancel: the given reason becomes the job''s error');
SELECT is((jobs.cancel(pg_temp.id('later'))).status, 'failed'::jobs.status, 'cancel: queued job not yet due -> failed');

-- running job: flag only
DO $$ BEGIN PERFORM pg_temp.running('p', 'tc.cancel', 'w1'); PERFORM pg_temp.snap(pg_temp.id('p')); END $$;
SELECT results_eq($$ SELECT job_id, accepted, status, wake FROM jobs.cancel(pg_temp.id('p'), 'user asked') $$,
    $$ VALUES (pg_temp.id('p'), true, 'processing'::jobs.status, '{}'::bigint[]) $$,
    'cancel: running job -> accepted, status still processing');
SELECT results_eq($$ SELECT status, owned_by, lease_version, cancel_requested_at, finished_at, error FROM jobs.job WHERE id = pg_temp.id('p') $$,
    $$ VALUES ('processing'::jobs.status, 'w1'::text, 1::bigint, now(), NULL::timestamptz, NULL::text) $$,
    'cancel: running row -> only cancel_requested_at set; owner, lease_version, error untouched');
SELECT is(pg_temp.last_event(pg_temp.id('p')), '(processing,processing,1,w1,cancel_requested,"user asked")',
    'cancel: logs cancel_requested (status unchanged) with the owner and the reason');
SELECT pg_temp.snap(pg_temp.id('p'));
SELECT results_eq($$ SELECT accepted, status FROM jobs.cancel(pg_temp.id('p')) $$, $$ VALUES (true, 'processing'::jobs.status) $$,
    'cancel: second cancel of a running job -> accepted again');
SELECT is(pg_temp.state(pg_temp.id('p')), pg_temp.snapped(pg_temp.id('p')), 'cancel: second cancel -> no second event, row unchanged');
SELECT results_eq($$ SELECT alive, cancel_requested FROM jobs.heartbeat(pg_temp.id('p'), 'w1', 1) $$, $$ VALUES (true, true) $$,
    'cancel: the worker sees the request through heartbeat');
SELECT results_eq($$ SELECT accepted, status FROM jobs.fail(pg_temp.id('p'), 'w1', 1, 'cancelled by user') $$,
    $$ VALUES (true, 'failed'::jobs.status) $$, 'cancel: worker then fails with retryable true -> failed, not retried');
SELECT is(pg_temp.last_event(pg_temp.id('p')), '(processing,failed,1,w1,cancelled,"cancelled by user")', 'cancel: honoured by fail -> reason cancelled');

-- honoured by reap, or finished anyway
DO $$ BEGIN
    PERFORM pg_temp.running('pr', 'tc.cancel', 'w1');
    PERFORM jobs.cancel(pg_temp.id('pr'));
    PERFORM pg_temp.elapse(pg_temp.id('pr'), '16 seconds');
    PERFORM pg_temp.running('pc', 'tc.cancel', 'w1');
    PERFORM jobs.cancel(pg_temp.id('pc'));
END $$;
SELECT is_empty($$ SELECT * FROM jobs.reap() WHERE job_id = pg_temp.id('pr') $$, 'cancel: expired cancel-requested job is not requeued by reap');
SELECT results_eq($$ SELECT status, retry_count, finished_at FROM jobs.job WHERE id = pg_temp.id('pr') $$,
    $$ VALUES ('failed'::jobs.status, 1, now()) $$, 'cancel: reap of an expired cancel-requested job -> failed');
SELECT is(pg_temp.last_event(pg_temp.id('pr')), '(processing,failed,1,w1,cancelled,"lease expired")', 'cancel: honoured by reap -> reason cancelled');
SELECT is((jobs.complete(pg_temp.id('pc'), 'w1', 1, '{"n": 1}')).status, 'done'::jobs.status,
    'cancel: a cancel-requested job whose work finished may still complete');

-- terminal jobs: no-op, accepted false
DO $$ BEGIN PERFORM pg_temp.snap(pg_temp.id('pc')); PERFORM pg_temp.snap(pg_temp.id('q')); END $$;
SELECT results_eq($$ SELECT job_id, accepted, status, wake FROM jobs.cancel(pg_temp.id('pc')) $$,
    $$ VALUES (pg_temp.id('pc'), false, 'done'::jobs.status, '{}'::bigint[]) $$, 'cancel: done job -> accepted false, status done');
SELECT is(pg_temp.state(pg_temp.id('pc')), pg_temp.snapped(pg_temp.id('pc')), 'cancel: done job -> row and events unchanged');
SELECT results_eq($$ SELECT accepted, status FROM jobs.cancel(pg_temp.id('q')) $$,
    $$ VALUES (false, 'failed'::jobs.status) $$, 'cancel: already failed job -> accepted false');
SELECT is(pg_temp.state(pg_temp.id('q')), pg_temp.snapped(pg_temp.id('q')), 'cancel: failed job -> row and events unchanged');
SELECT throws_ok($$ SELECT jobs.cancel(-42) $$, 'JB002', NULL, 'cancel: unknown job -> JB002');

-- wake
DO $$ BEGIN
    PERFORM pg_temp.job('o1', 'tc.cancel', '{}', NULL, 'cancel:key');
    PERFORM pg_temp.job('o2', 'tc.cancel', '{}', NULL, 'cancel:key');
    INSERT INTO ids SELECT 'coord', (jobs.fan_out('[{"kind": "tc.cancel"}]', '{"kind": "tc.cancel"}')).id;
    INSERT INTO ids SELECT 'child', j.id FROM jobs.job AS j WHERE j.parent_id = pg_temp.id('coord');
END $$;
SELECT is((jobs.cancel(pg_temp.id('o1'))).wake, ARRAY[pg_temp.id('o2')], 'cancel: queued ordering-key head -> wake lists the successor');
SELECT is((jobs.cancel(pg_temp.id('child'))).wake, ARRAY[pg_temp.id('coord')], 'cancel: last queued child -> wake lists the coordinator');
SELECT is((SELECT count(*) FROM jobs.claim_many(ARRAY[pg_temp.id('o2'), pg_temp.id('coord')], 'w1')), 2::bigint, 'cancel: woken jobs are claimable');

SELECT is(pg_temp.error_of('SELECT jobs.cancel(-42)'), 'JB002 jobs.cancel hint=true',
    'cancel: the JB002 message names jobs.cancel and carries a HINT');

-- roles: producers cancel, workers do not
SET LOCAL ROLE jobs_worker;
SELECT throws_ok($$ SELECT jobs.cancel(1) $$, '42501', NULL, 'cancel: jobs_worker may not cancel -> 42501');
RESET ROLE;
SET LOCAL ROLE jobs_producer;
SELECT throws_ok($$ SELECT jobs.cancel(-42) $$, 'JB002', NULL, 'cancel: jobs_producer may cancel (unknown id -> JB002, not 42501)');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
