-- pgTAP tests for jobs.pause(queue) / jobs.resume(queue) / jobs.paused_queues(): a paused
-- queue's jobs are claimed by none of claim, claim_many, claim_next, nor swept by stale_queued.
-- Contract: docs/sql-api.md "Pausing a queue".
BEGIN;
SELECT plan(26);
\ir helpers/lease_helpers.psql

DO $$ BEGIN
    PERFORM jobs.define_type('tc.pa.a', queue => 'tc.pa.q');
    PERFORM jobs.define_type('tc.pa.b', queue => 'tc.pa.other');
    PERFORM pg_temp.job('a1', 'tc.pa.a');
    PERFORM pg_temp.job('a2', 'tc.pa.a');
    PERFORM pg_temp.job('a3', 'tc.pa.a');
    PERFORM pg_temp.job('b1', 'tc.pa.b');
    PERFORM pg_temp.job('b2', 'tc.pa.b');
    PERFORM pg_temp.running('r1', 'tc.pa.a', 'w0');
END $$;

SELECT is(jobs.pause('tc.pa.q'), true, 'pause: a running queue -> true');
SELECT is(jobs.pause('tc.pa.q'), false, 'pause: an already paused queue -> false (nothing changed)');
SELECT is((SELECT array_agg(queue || ' by ' || (paused_by = session_user::text)) FROM jobs.paused_queues()),
    ARRAY['tc.pa.q by true'], 'pause: paused_queues lists it, with who paused it');
SELECT is((SELECT array_agg(queue || ' ' || action || ' ' || (by_role::text = session_user::text) ORDER BY id) FROM jobs.queue_pause_log),
    ARRAY['tc.pa.q paused true'], 'pause: one audit row for the change, none for the repeat');

DO $$ BEGIN PERFORM pg_temp.snap(pg_temp.id('a1')); PERFORM pg_temp.snap(pg_temp.id('a2')); END $$;
SELECT is_empty($$ SELECT * FROM jobs.claim(pg_temp.id('a1'), 'w1') $$, 'pause: claim of a paused queue''s job grants nothing');
SELECT results_eq($$ SELECT job_id FROM jobs.claim_many(ARRAY[pg_temp.id('a1'), pg_temp.id('b1'), pg_temp.id('a2')], 'w1') $$,
    $$ VALUES (pg_temp.id('b1')) $$, 'pause: claim_many grants only the ids of running queues');
SELECT is(pg_temp.state(pg_temp.id('a1')), pg_temp.snapped(pg_temp.id('a1')),
    'pause: the refused job is untouched (no event, no change)');
SELECT is(pg_temp.state(pg_temp.id('a2')), pg_temp.snapped(pg_temp.id('a2')), 'pause: ... and the other');
SELECT is_empty($$ SELECT * FROM jobs.claim_next('w1', ARRAY['tc.pa.q'], 10) $$,
    'pause: claim_next of the paused queue grants nothing');
SELECT results_eq($$ SELECT job_id FROM jobs.claim_next('w1', NULL, 10) $$,
    $$ VALUES (pg_temp.id('b2')) $$, 'pause: claim_next over every queue passes the paused one over');
SELECT is_empty($$ SELECT * FROM jobs.stale_queued('tc.pa.q', '0 seconds') $$,
    'pause: stale_queued signals nothing of a paused queue (the reaper leaves it alone)');
SELECT is((SELECT status FROM jobs.job WHERE id = pg_temp.id('r1')), 'processing'::jobs.status,
    'pause: a job claimed before the pause runs on');
SELECT is((SELECT accepted FROM jobs.complete(pg_temp.id('r1'), 'w0', pg_temp.lv(pg_temp.id('r1')), '{}')), true,
    'pause: ... and may complete');
DO $$ BEGIN PERFORM pg_temp.job('a4', 'tc.pa.a'); END $$;
SELECT is((SELECT status FROM jobs.job WHERE id = pg_temp.id('a4')), 'queued'::jobs.status,
    'pause: submitting to a paused queue still works (the job waits)');

-- resume
SELECT is(jobs.resume('tc.pa.q'), true, 'resume: a paused queue -> true');
SELECT is(jobs.resume('tc.pa.q'), false, 'resume: a running queue -> false');
SELECT is(jobs.resume('tc.pa.never'), false, 'resume: a queue never paused -> false');
SELECT is_empty($$ SELECT * FROM jobs.paused_queues() $$, 'resume: no queue paused any more');
SELECT results_eq($$ SELECT action FROM jobs.queue_pause_log WHERE queue = 'tc.pa.q' ORDER BY id $$,
    $$ VALUES ('paused'::text), ('resumed'::text) $$, 'resume: logged once');
SELECT bag_eq($$ SELECT job_id FROM jobs.stale_queued('tc.pa.q', '0 seconds') $$,
    $$ VALUES (pg_temp.id('a1')), (pg_temp.id('a2')), (pg_temp.id('a3')), (pg_temp.id('a4')) $$,
    'resume: stale_queued(queue, 0) lists every waiting job: what the caller pushes');
SELECT results_eq($$ SELECT job_id FROM jobs.claim(pg_temp.id('a1'), 'w1') $$,
    $$ VALUES (pg_temp.id('a1')) $$, 'resume: the refused job is claimable again');

-- validation and grants
SELECT throws_ok($$ SELECT jobs.pause(NULL) $$, '22023', NULL, 'pause: NULL -> 22023');
SELECT throws_ok($$ SELECT jobs.pause('bad queue') $$, '22023', NULL, 'pause: a malformed name -> 22023');
SELECT throws_ok($$ SELECT jobs.resume('') $$, '22023', NULL, 'resume: an empty name -> 22023');
SET LOCAL ROLE jobs_worker;
SELECT throws_ok($$ SELECT jobs.pause('tc.pa.q') $$, '42501', NULL, 'pause: jobs_worker may not pause -> 42501');
RESET ROLE;
SET LOCAL ROLE jobs_producer;
SELECT throws_ok($$ SELECT jobs.resume('tc.pa.q') $$, '42501', NULL, 'resume: jobs_producer may not resume -> 42501');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
