-- pgTAP tests for jobs.reap(max_jobs): expired leases -> queued at once (budget left) or failed.
-- Contract: docs/design.md §2 (processing -> queued/failed by reap: no backoff and error 'lease expired'
-- when heartbeats stopped; the kind's backoff, reason timed_out, error 'timeout after ...' at the timeout;
-- queued/enqueue_failed -> failed when retry_count > max_retries), §4 (signal rows, cancel), §5.
BEGIN;
SELECT plan(42);
-- Shared helpers (temporary objects, gone with the ROLLBACK).
\ir helpers/lease_helpers.psql

DO $$ BEGIN
    PERFORM jobs.define_type('tc.reap', queue => 'tc.reap.q', lease_timeout => '15 seconds', timeout => '30 seconds', max_retries => 3);
    PERFORM jobs.define_type('tc.reap0', queue => 'tc.reap.q', max_retries => 0);
END $$;

SELECT is_empty($$ SELECT * FROM jobs.reap() $$, 'reap: no expired lease -> zero rows');

-- a lease that expired, one that did not
DO $$ BEGIN
    PERFORM pg_temp.running('a', 'tc.reap', 'w1');
    PERFORM pg_temp.running('fresh', 'tc.reap', 'w1');
    PERFORM pg_temp.elapse(pg_temp.id('a'), '16 seconds');
    PERFORM pg_temp.elapse(pg_temp.id('fresh'), '14 seconds');
    PERFORM pg_temp.snap(pg_temp.id('fresh'));
END $$;
SELECT results_eq($$ SELECT job_id, queue, run_after FROM jobs.reap() $$,
    $$ VALUES (pg_temp.id('a'), 'tc.reap.q'::text, now()) $$,
    'reap: expired lease -> one signal (job, queue, run_after now): requeued without backoff');
SELECT results_eq(
    $$ SELECT status, retry_count, error, result, owned_by, claimed_at, lease_expires_at, lease_version, run_after, finished_at
         FROM jobs.job WHERE id = pg_temp.id('a') $$,
    $$ VALUES ('queued'::jobs.status, 1, 'lease expired'::text, NULL::jsonb, NULL::text, NULL::timestamptz, NULL::timestamptz, 2::bigint, now(), NULL::timestamptz) $$,
    'reap: requeued row -> retry_count 1, error lease expired, owner/claim/lease cleared, lease_version 2, run_after now');
SELECT is(pg_temp.last_event(pg_temp.id('a')), '(processing,queued,2,w1,reaped,"lease expired")',
    'reap: logs processing -> queued, lease_version 2, the lost owner, reaped, lease expired');
SELECT is(pg_temp.state(pg_temp.id('fresh')), pg_temp.snapped(pg_temp.id('fresh')), 'reap: lease not yet expired -> row unchanged');
SELECT results_eq($$ SELECT lease_version, attempt FROM jobs.claim(pg_temp.id('a'), 'w2') $$, $$ VALUES (3::bigint, 2) $$,
    'reap: requeued job is claimable at once (attempt 2, lease_version 3)');
SELECT throws_ok($$ SELECT jobs.complete(pg_temp.id('a'), 'w1', 1) $$, 'JB001', NULL, 'reap: the old owner is fenced out -> JB001');
SELECT is_empty($$ SELECT * FROM jobs.reap() $$, 'reap: second run with nothing expired -> zero rows (duplicate reaper runs are no-ops)');

-- heartbeats cannot keep a hung job alive past its timeout
DO $$ BEGIN
    PERFORM pg_temp.running('hung', 'tc.reap', 'w1');
    PERFORM pg_temp.elapse(pg_temp.id('hung'), '10 seconds');
    PERFORM jobs.heartbeat(pg_temp.id('hung'), 'w1', 1);
    PERFORM pg_temp.elapse(pg_temp.id('hung'), '10 seconds');
    PERFORM jobs.heartbeat(pg_temp.id('hung'), 'w1', 1);
    PERFORM pg_temp.elapse(pg_temp.id('hung'), '10 seconds');
    PERFORM jobs.heartbeat(pg_temp.id('hung'), 'w1', 1);
    PERFORM pg_temp.elapse(pg_temp.id('hung'), '1 second');
    PERFORM jobs.heartbeat(pg_temp.id('hung'), 'w1', 1);
END $$;
SELECT results_eq($$ SELECT job_id FROM jobs.reap() $$, $$ VALUES (pg_temp.id('hung')) $$,
    'reap: job past its execution timeout is reaped although it heartbeats every 10 s');
SELECT results_eq($$ SELECT status, error, retry_count FROM jobs.job WHERE id = pg_temp.id('hung') $$,
    $$ VALUES ('queued'::jobs.status, 'timeout after 00:00:30'::text, 1) $$, 'reap: hung job -> requeued as a timeout (error timeout after 30 s)');
SELECT ok((SELECT j.run_after > now() AND j.run_after <= now() + t.backoff_max
              FROM jobs.job AS j JOIN jobs.job_type AS t ON t.kind = j.kind WHERE j.id = pg_temp.id('hung')),
    'reap: a timed-out job waits for its kind''s backoff, as a failure does (not due at once)');
SELECT is(pg_temp.last_event(pg_temp.id('hung')), '(processing,queued,2,w1,timed_out,"timeout after 00:00:30")',
    'reap: a timeout is logged as timed_out, apart from a lost worker''s reaped');
SELECT results_eq($$ SELECT sum(reaped)::integer, sum(retried)::integer, sum(failed)::integer FROM jobs.metric_minute WHERE kind = 'tc.reap' AND minute = date_trunc('minute', now()) $$,
    $$ VALUES (1, 2, 2) $$, 'reap: the rollup counts the lost lease in reaped and both in retried and failed: the timeout is a failed attempt, not a reap');

-- budget spent, cancel requested
DO $$ BEGIN
    PERFORM pg_temp.running('z', 'tc.reap0', 'w1');
    PERFORM pg_temp.running('c', 'tc.reap', 'w1');
    PERFORM jobs.cancel(pg_temp.id('c'), 'user asked');
    PERFORM pg_temp.elapse(pg_temp.id('z'), '16 seconds');
    PERFORM pg_temp.elapse(pg_temp.id('c'), '16 seconds');
END $$;
SELECT is_empty($$ SELECT * FROM jobs.reap() $$, 'reap: jobs it fails are not returned as signals');
SELECT results_eq(
    $$ SELECT status, retry_count, error, owned_by, claimed_at, lease_expires_at, lease_version, finished_at FROM jobs.job WHERE id = pg_temp.id('z') $$,
    $$ VALUES ('failed'::jobs.status, 1, 'lease expired'::text, NULL::text, NULL::timestamptz, NULL::timestamptz, 1::bigint, now()) $$,
    'reap: budget spent -> failed, retry_count 1, error lease expired, finished_at now, lease_version unchanged');
SELECT is(pg_temp.last_event(pg_temp.id('z')), '(processing,failed,1,w1,exhausted,"lease expired")', 'reap: budget spent -> reason exhausted');
SELECT results_eq($$ SELECT status, error, finished_at FROM jobs.job WHERE id = pg_temp.id('c') $$,
    $$ VALUES ('failed'::jobs.status, 'lease expired'::text, now()) $$,
    'reap: expired cancel-requested job with budget left -> failed, not requeued');
SELECT is(pg_temp.last_event(pg_temp.id('c')), '(processing,failed,1,w1,cancelled,"lease expired")', 'reap: expired cancel-requested job -> reason cancelled');

-- max_jobs: oldest expiry first, whatever the ids (the oldest id expired last here)
DO $$ BEGIN
    PERFORM pg_temp.running('m1', 'tc.reap', 'w1');
    PERFORM pg_temp.running('m2', 'tc.reap', 'w1');
    PERFORM pg_temp.running('m3', 'tc.reap', 'w1');
    PERFORM pg_temp.elapse(pg_temp.id('m1'), '16 seconds');
    PERFORM pg_temp.elapse(pg_temp.id('m2'), '20 seconds');
    PERFORM pg_temp.elapse(pg_temp.id('m3'), '18 seconds');
END $$;
SELECT bag_eq($$ SELECT job_id FROM jobs.reap(2) $$, $$ VALUES (pg_temp.id('m2')), (pg_temp.id('m3')) $$,
    'reap: max_jobs 2 -> the two leases that expired first, not the two oldest ids');
SELECT is((SELECT status FROM jobs.job WHERE id = pg_temp.id('m1')), 'processing'::jobs.status, 'reap: the expired lease beyond max_jobs waits for the next run');
SELECT results_eq($$ SELECT job_id FROM jobs.reap(2) $$, $$ VALUES (pg_temp.id('m1')) $$, 'reap: next run takes the rest');

-- jobs woken by the jobs it failed are returned too
DO $$ BEGIN
    PERFORM pg_temp.job('o1', 'tc.reap0', '{}', NULL, 'reap:key');
    PERFORM pg_temp.job('o2', 'tc.reap', '{}', NULL, 'reap:key');
    PERFORM jobs.claim(pg_temp.id('o1'), 'w1');
    INSERT INTO ids SELECT 'coord', (jobs.fan_out('[{"kind": "tc.reap0"}]', '{"kind": "tc.reap"}')).id;
    INSERT INTO ids SELECT 'child', j.id FROM jobs.job AS j WHERE j.parent_id = pg_temp.id('coord');
    PERFORM jobs.claim(pg_temp.id('child'), 'w1');
    PERFORM pg_temp.running('rq', 'tc.reap', 'w1');
    PERFORM pg_temp.elapse(pg_temp.id('o1'), '16 seconds');
    PERFORM pg_temp.elapse(pg_temp.id('child'), '16 seconds');
    PERFORM pg_temp.elapse(pg_temp.id('rq'), '16 seconds');
END $$;
SELECT bag_eq($$ SELECT job_id, queue, run_after FROM jobs.reap() $$,
    $$ VALUES (pg_temp.id('rq'), 'tc.reap.q'::text, now()), (pg_temp.id('o2'), 'tc.reap.q', now()), (pg_temp.id('coord'), 'tc.reap.q', now()) $$,
    'reap: signals the requeued job and the jobs woken by the ones it failed (ordering successor, coordinator)');
SELECT results_eq($$ SELECT status FROM jobs.job WHERE id IN (pg_temp.id('o1'), pg_temp.id('child')) ORDER BY id $$,
    $$ VALUES ('failed'::jobs.status), ('failed'::jobs.status) $$, 'reap: the exhausted head and child are failed');

-- queued / enqueue_failed jobs whose budget is already spent (hand edit)
DO $$ BEGIN
    PERFORM pg_temp.job('over', 'tc.reap');
    PERFORM pg_temp.job('overef', 'tc.reap');
    PERFORM jobs.mark_enqueue_failed(ARRAY[pg_temp.id('overef')]);
    UPDATE jobs.job SET retry_count = 4 WHERE id IN (pg_temp.id('over'), pg_temp.id('overef'));
    PERFORM pg_temp.job('overerr', 'tc.reap');
    UPDATE jobs.job SET retry_count = 4, error = 'HTTP 503 from billing' WHERE id = pg_temp.id('overerr');
    PERFORM pg_temp.job('ok', 'tc.reap');
    UPDATE jobs.job SET retry_count = 3 WHERE id = pg_temp.id('ok');
    PERFORM pg_temp.snap(pg_temp.id('ok'));
END $$;
SELECT is_empty($$ SELECT * FROM jobs.reap() $$, 'reap: overspent queued jobs are failed, not signalled');
SELECT results_eq($$ SELECT status, finished_at, error FROM jobs.job WHERE id IN (pg_temp.id('over'), pg_temp.id('overef')) ORDER BY id $$,
    $$ VALUES ('failed'::jobs.status, now(), 'retry budget exhausted'::text), ('failed'::jobs.status, now(), 'retry budget exhausted'::text) $$,
    'reap: queued and enqueue_failed jobs with retry_count > max_retries -> failed');
SELECT results_eq($$ SELECT job_id, (from_status, to_status, lease_version, worker, reason)::text FROM jobs.history
                     WHERE job_id IN (pg_temp.id('over'), pg_temp.id('overef')) AND to_status = 'failed' ORDER BY job_id $$,
    $$ VALUES (pg_temp.id('over'), '(queued,failed,0,,exhausted)'), (pg_temp.id('overef'), '(enqueue_failed,failed,0,,exhausted)') $$,
    'reap: overspent jobs -> exhausted events from queued / enqueue_failed');
SELECT is(pg_temp.state(pg_temp.id('ok')), pg_temp.snapped(pg_temp.id('ok')), 'reap: queued job with retry_count = max_retries (one attempt left) -> untouched');
SELECT is((SELECT error FROM jobs.job WHERE id = pg_temp.id('overerr')), 'HTTP 503 from billing',
    'reap: an overspent job keeps its last attempt''s error (jobs.end_unheld)');
SELECT set_eq($$ SELECT job_id FROM jobs.page WHERE job_id IN (pg_temp.id('over'), pg_temp.id('overef'), pg_temp.id('overerr')) $$,
    $$ VALUES (pg_temp.id('over')), (pg_temp.id('overef')), (pg_temp.id('overerr')) $$,
    'reap: every overspent job is a dead letter with its page, written in the same transaction');

-- bad input
SELECT throws_ok($$ SELECT * FROM jobs.reap(0) $$, '22023', NULL, 'reap: max_jobs 0 -> 22023');
SELECT throws_ok($$ SELECT * FROM jobs.reap(NULL) $$, '22023', NULL, 'reap: max_jobs NULL -> 22023');

SELECT is(pg_temp.error_of('SELECT * FROM jobs.reap(0)'), '22023 jobs.reap hint=true',
    'reap: the 22023 message names jobs.reap and carries a HINT');

-- The reaper's bypass is asked for by name: finish_leases takes expired and timeout from
-- jobs.reap alone, refuses a NULL verdict or caller, and end_unheld only its two reasons.
DO $$ BEGIN
    PERFORM jobs.define_type('tc.bypass', lease_timeout => '1 minute');
    PERFORM pg_temp.job('bypass', 'tc.bypass');
    PERFORM jobs.claim(pg_temp.id('bypass'), 'w-bypass');
END $$;
SELECT throws_ok($$ SELECT * FROM jobs.finish_leases(ARRAY[pg_temp.id('bypass')], ARRAY['someone-else'], ARRAY[1::bigint],
                                                    ARRAY['expired'::jobs.verdict], ARRAY[NULL::jsonb], ARRAY['x'],
                                                    NULL, 'jobs.complete_many') $$,
                 '22023', 'jobs.complete_many: the verdicts expired and timeout are the reaper''s',
                 'finish_leases: expired from a caller other than jobs.reap -> 22023');
SELECT throws_ok($$ SELECT * FROM jobs.finish_leases(ARRAY[pg_temp.id('bypass')], ARRAY['w-bypass'], ARRAY[1::bigint],
                                                    ARRAY[NULL::jobs.verdict], ARRAY[NULL::jsonb], ARRAY['x'],
                                                    NULL, 'jobs.fail_many') $$,
                 '22023', NULL, 'finish_leases: a NULL verdict -> 22023, not a retry');
SELECT throws_ok($$ SELECT * FROM jobs.finish_leases(ARRAY[pg_temp.id('bypass')], ARRAY['w-bypass'], ARRAY[1::bigint],
                                                    ARRAY['done'::jobs.verdict], ARRAY[NULL::jsonb], ARRAY[NULL::text],
                                                    NULL, NULL) $$,
                 '22023', NULL, 'finish_leases: no caller -> 22023');
SELECT throws_ok($$ SELECT * FROM jobs.finish_leases(ARRAY[pg_temp.id('bypass')], ARRAY['w-bypass'], ARRAY[1::bigint],
                                                    '{dnoe}', ARRAY[NULL::jsonb], ARRAY[NULL::text], NULL, 'x') $$,
                 '22P02', NULL, 'finish_leases: a misspelt verdict is an error where it is written');
SELECT is((SELECT status FROM jobs.job WHERE id = pg_temp.id('bypass')), 'processing'::jobs.status,
          'finish_leases: the refused calls changed nothing');
SELECT throws_ok($$ SELECT jobs.end_unheld(ARRAY[pg_temp.id('bypass')], 'retried', ARRAY['x']) $$, '22023', NULL,
                 'end_unheld: a reason other than cancelled, exhausted or dependency_failed -> 22023');
SELECT throws_ok($$ SELECT jobs.end_unheld(ARRAY[pg_temp.id('bypass')], 'cancelled', ARRAY['x', 'y']) $$, '22023', NULL,
                 'end_unheld: an error count other than the job count -> 22023');

-- roles: reaping is an admin task
SET LOCAL ROLE jobs_worker;
SELECT throws_ok($$ SELECT * FROM jobs.reap() $$, '42501', NULL, 'reap: jobs_worker may not reap -> 42501');
RESET ROLE;
SET LOCAL ROLE jobs_producer;
SELECT throws_ok($$ SELECT * FROM jobs.reap() $$, '42501', NULL, 'reap: jobs_producer may not reap -> 42501');
RESET ROLE;
SET LOCAL ROLE jobs_admin;
SELECT lives_ok($$ SELECT * FROM jobs.reap() $$, 'reap: jobs_admin may reap');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
