-- pgTAP tests for jobs.progress: the lease holder stores the job's progress, readable through
-- jobs.get; it extends the lease like a heartbeat; anyone else gets JB001 and changes nothing.
-- Contract: docs/sql-api.md "progress".
BEGIN;
SELECT plan(11);
\ir helpers/lease_helpers.psql

DO $$ BEGIN
    PERFORM jobs.define_type('tc.progress', lease_timeout => interval '30 seconds', timeout => interval '10 minutes');
    PERFORM pg_temp.running('p', 'tc.progress', 'w1');
    UPDATE jobs.job SET lease_expires_at = now() + interval '1 second' WHERE id = pg_temp.id('p');
END $$;

SELECT results_eq($$ SELECT alive, cancel_requested, lease_expires_at FROM jobs.progress(pg_temp.id('p'), 'w1', 1, '{"done": 3, "of": 10}') $$,
    $$ VALUES (true, false, now() + interval '30 seconds') $$,
    'progress: answers like a heartbeat and extends the lease');
SELECT results_eq($$ SELECT progress, progress_at FROM jobs.get(pg_temp.id('p')) $$,
    $$ VALUES ('{"done": 3, "of": 10}'::jsonb, now()) $$, 'progress: readable through jobs.get, with its time');
SELECT is(pg_temp.nevents(pg_temp.id('p')), 2::bigint, 'progress: not a transition, no event row');

DO $$ BEGIN PERFORM pg_temp.snap(pg_temp.id('p')); END $$;
SELECT throws_ok($$ SELECT jobs.progress(pg_temp.id('p'), 'w2', 1, '{}') $$, 'JB001', NULL, 'progress: another worker -> JB001');
SELECT throws_ok($$ SELECT jobs.progress(pg_temp.id('p'), 'w1', 0, '{}') $$, 'JB001', NULL, 'progress: an old lease_version -> JB001');
SELECT throws_ok($$ SELECT jobs.progress(pg_temp.id('p'), 'w1', 1, '{}', gen_random_uuid()) $$, 'JB001', NULL, 'progress: a wrong token -> JB001');
SELECT throws_ok($$ SELECT jobs.progress(pg_temp.id('p'), 'w1', 1, jsonb_build_object('x', repeat('a', 70000))) $$, '22023', NULL,
    'progress: over 64 KiB -> 22023');
SELECT throws_ok($$ SELECT jobs.progress(pg_temp.id('p'), 'w1', 1, '{"eta": 1e400}') $$, '22003', NULL,
    'progress: a number beyond the IEEE-754 double range -> 22003');
SELECT throws_ok($$ SELECT jobs.progress(-1, 'w1', 1, '{}') $$, 'JB002', NULL, 'progress: unknown job -> JB002');
SELECT is(pg_temp.state(pg_temp.id('p')), pg_temp.snapped(pg_temp.id('p')), 'progress: refused calls wrote nothing');

DO $$ BEGIN PERFORM jobs.complete(pg_temp.id('p'), 'w1', 1, '{"ok": true}'); END $$;
SELECT is((SELECT progress FROM jobs.get(pg_temp.id('p'))), '{"done": 3, "of": 10}'::jsonb, 'progress: kept after the job is done');

SELECT * FROM finish();
ROLLBACK;
