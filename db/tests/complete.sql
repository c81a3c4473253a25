-- pgTAP tests for jobs.complete(job_id, worker, lease_version, result): processing -> done under the authority predicate.
-- Contract: docs/design.md §2 (processing -> done, authority predicate, JB001), §4 (outcome, wake), §5, §8.2.
BEGIN;
SELECT plan(40);
-- Shared helpers (temporary objects, gone with the ROLLBACK).
\ir helpers/lease_helpers.psql

DO $$ BEGIN
    PERFORM jobs.define_type('tc.done');
    PERFORM pg_temp.running('a', 'tc.done', 'w1');
END $$;

SELECT results_eq($$ SELECT * FROM jobs.complete(pg_temp.id('a'), 'w1', 1, '{"ok": true}') $$,
    $$ VALUES (pg_temp.id('a'), true, 'done'::jobs.status, now(), '{}'::bigint[]) $$,
    'complete: holder of the lease -> accepted, status done, run_after, empty wake');
SELECT results_eq(
    $$ SELECT status, result, finished_at, owned_by, claimed_at, lease_expires_at, lease_version, retry_count, error, updated_at
         FROM jobs.job WHERE id = pg_temp.id('a') $$,
    $$ VALUES ('done'::jobs.status, '{"ok": true}'::jsonb, now(), 'w1'::text, now(), NULL::timestamptz, 1::bigint, 0, NULL::text, now()) $$,
    'complete: row -> done with the result, finished_at now, owner and claimed_at kept, no lease, lease_version unchanged');
SELECT is(pg_temp.last_event(pg_temp.id('a')), '(processing,done,1,w1,completed,)',
    'complete: logs processing -> done, lease_version 1, worker, completed');
SELECT is(pg_temp.nevents(pg_temp.id('a')), 3::bigint, 'complete: exactly one event appended');

-- at most one accepted completion
SELECT pg_temp.snap(pg_temp.id('a'));
SELECT throws_ok($$ SELECT jobs.complete(pg_temp.id('a'), 'w1', 1, '{"ok": "again"}') $$, 'JB001', NULL,
    'complete: second completion with the same lease -> JB001');
SELECT is(pg_temp.state(pg_temp.id('a')), pg_temp.snapped(pg_temp.id('a')), 'complete: second completion -> row and events unchanged (first result kept)');

-- stale leases on a processing job
DO $$ BEGIN PERFORM pg_temp.running('s', 'tc.done', 'w1'); PERFORM pg_temp.snap(pg_temp.id('s')); END $$;
SELECT throws_ok($$ SELECT jobs.complete(pg_temp.id('s'), 'w1', 0, '{}') $$, 'JB001', NULL, 'complete: stale lease_version -> JB001');
SELECT is(pg_temp.state(pg_temp.id('s')), pg_temp.snapped(pg_temp.id('s')), 'complete: stale lease_version -> row unchanged');
SELECT throws_ok($$ SELECT jobs.complete(pg_temp.id('s'), 'w1', 2, '{}') $$, 'JB001', NULL, 'complete: future lease_version -> JB001');
SELECT throws_ok($$ SELECT jobs.complete(pg_temp.id('s'), 'w2', 1, '{}') $$, 'JB001', NULL, 'complete: right lease_version, wrong worker -> JB001');
SELECT is(pg_temp.state(pg_temp.id('s')), pg_temp.snapped(pg_temp.id('s')), 'complete: wrong worker / lease -> row and events unchanged');

-- never claimed
DO $$ BEGIN PERFORM pg_temp.job('q', 'tc.done'); PERFORM pg_temp.snap(pg_temp.id('q')); END $$;
SELECT throws_ok($$ SELECT jobs.complete(pg_temp.id('q'), 'w1', 0) $$, 'JB001', NULL, 'complete: queued job -> JB001');
SELECT is(pg_temp.state(pg_temp.id('q')), pg_temp.snapped(pg_temp.id('q')), 'complete: queued job -> row unchanged');

-- reaped, then reassigned: the old owner is fenced out, the new one wins
DO $$ BEGIN
    PERFORM pg_temp.running('r', 'tc.done', 'w1');
    PERFORM pg_temp.elapse(pg_temp.id('r'), '16 seconds');
    PERFORM jobs.reap();
    PERFORM pg_temp.snap(pg_temp.id('r'));
END $$;
SELECT throws_ok($$ SELECT jobs.complete(pg_temp.id('r'), 'w1', 1, '{"late": true}') $$, 'JB001', NULL, 'complete: after the reaper requeued the job -> JB001');
SELECT is(pg_temp.state(pg_temp.id('r')), pg_temp.snapped(pg_temp.id('r')), 'complete: reaped job -> row unchanged (still queued)');
DO $$ BEGIN PERFORM jobs.claim(pg_temp.id('r'), 'w2'); PERFORM pg_temp.snap(pg_temp.id('r')); END $$;
SELECT throws_ok($$ SELECT jobs.complete(pg_temp.id('r'), 'w1', 1, '{"late": true}') $$, 'JB001', NULL, 'complete: job reassigned to another worker, old lease -> JB001');
SELECT is(pg_temp.state(pg_temp.id('r')), pg_temp.snapped(pg_temp.id('r')), 'complete: reassigned job -> new owner''s row unchanged');
SELECT is((jobs.complete(pg_temp.id('r'), 'w2', 3, '{"second": true}')).accepted, true, 'complete: new owner with lease_version 3 -> accepted');
SELECT results_eq($$ SELECT status, result, owned_by, error FROM jobs.job WHERE id = pg_temp.id('r') $$,
    $$ VALUES ('done'::jobs.status, '{"second": true}'::jsonb, 'w2'::text, 'lease expired'::text) $$,
    'complete: new owner''s result stored; error keeps the latest failure');

-- failed jobs and unknown ids
DO $$ BEGIN
    PERFORM pg_temp.running('f', 'tc.done', 'w1');
    PERFORM jobs.fail(pg_temp.id('f'), 'w1', 1, 'fatal', retryable => false);
    PERFORM pg_temp.snap(pg_temp.id('f'));
END $$;
SELECT throws_ok($$ SELECT jobs.complete(pg_temp.id('f'), 'w1', 1) $$, 'JB001', NULL, 'complete: failed job -> JB001');
SELECT is(pg_temp.state(pg_temp.id('f')), pg_temp.snapped(pg_temp.id('f')), 'complete: failed job -> row unchanged');
SELECT throws_ok($$ SELECT jobs.complete(-42, 'w1', 1) $$, 'JB002', NULL, 'complete: unknown job -> JB002');

-- bad worker ids
SELECT throws_ok($$ SELECT jobs.complete(pg_temp.id('s'), '', 1) $$, '22023', NULL, 'complete: empty worker -> 22023');
SELECT throws_ok($$ SELECT jobs.complete(pg_temp.id('s'), NULL, 1) $$, '22023', NULL, 'complete: NULL worker -> 22023');
SELECT is(pg_temp.state(pg_temp.id('s')), pg_temp.snapped(pg_temp.id('s')), 'complete: rejected worker ids -> row unchanged');

-- a stale completion rolls back the caller's effects in the same transaction
CREATE TEMP TABLE effects (job_id bigint);
SELECT throws_ok($$ WITH e AS (INSERT INTO effects VALUES (pg_temp.id('s')) RETURNING job_id)
                    SELECT jobs.complete((SELECT job_id FROM e), 'w1', 0) $$, 'JB001', NULL,
    'complete: stale completion together with effects -> JB001');
SELECT is_empty($$ SELECT * FROM effects $$, 'complete: the stale worker''s effects roll back with its completion');

-- an expired lease nobody reaped still holds
DO $$ BEGIN PERFORM pg_temp.running('x', 'tc.done', 'w1'); PERFORM pg_temp.elapse(pg_temp.id('x'), '20 seconds'); END $$;
SELECT results_eq($$ SELECT accepted, status FROM jobs.complete(pg_temp.id('x'), 'w1', 1) $$, $$ VALUES (true, 'done'::jobs.status) $$,
    'complete: expired but unreaped lease -> accepted');
SELECT is((SELECT result FROM jobs.job WHERE id = pg_temp.id('x')), NULL::jsonb, 'complete: result omitted -> result NULL');

-- cancel requested: the work finished anyway
DO $$ BEGIN PERFORM pg_temp.running('c', 'tc.done', 'w1'); PERFORM jobs.cancel(pg_temp.id('c')); END $$;
SELECT results_eq($$ SELECT accepted, status FROM jobs.complete(pg_temp.id('c'), 'w1', 1, '{"n": 1}') $$, $$ VALUES (true, 'done'::jobs.status) $$,
    'complete: cancel-requested job whose work finished -> done');

-- wake: ordering-key successor and fan-in coordinator
DO $$ BEGIN
    PERFORM pg_temp.job('o1', 'tc.done', '{}', NULL, 'done:key');
    PERFORM pg_temp.job('o2', 'tc.done', '{}', NULL, 'done:key');
    PERFORM pg_temp.job('o3', 'tc.done', '{}', NULL, 'done:key');
    PERFORM jobs.claim(pg_temp.id('o1'), 'w1');
    INSERT INTO ids SELECT 'coord', (jobs.fan_out('[{"kind": "tc.done"}, {"kind": "tc.done"}]', '{"kind": "tc.done"}')).id;
    INSERT INTO ids SELECT 'child' || row_number() OVER (ORDER BY j.id), j.id FROM jobs.job AS j WHERE j.parent_id = pg_temp.id('coord');
    PERFORM jobs.claim_many(ARRAY[pg_temp.id('child1'), pg_temp.id('child2')], 'w1');
END $$;
SELECT is((jobs.complete(pg_temp.id('o1'), 'w1', 1)).wake, ARRAY[pg_temp.id('o2')],
    'complete: head of an ordering key -> wake lists the next job of that key only');
SELECT is((SELECT count(*) FROM jobs.claim(pg_temp.id('o3'), 'w1')), 0::bigint, 'complete: the third job of the key is still blocked');
SELECT is((jobs.complete(pg_temp.id('child1'), 'w1', 1)).wake, '{}'::bigint[],
    'complete: first of two children -> empty wake, coordinator still waits');
SELECT is((SELECT pending_children FROM jobs.job WHERE id = pg_temp.id('coord')), 1, 'complete: coordinator pending_children 2 -> 1');
SELECT is((jobs.complete(pg_temp.id('child2'), 'w1', 1)).wake, ARRAY[pg_temp.id('coord')],
    'complete: last child -> wake lists the coordinator');
SELECT is((SELECT count(*) FROM jobs.claim(pg_temp.id('coord'), 'w1')), 1::bigint, 'complete: woken coordinator is claimable');

SELECT is(pg_temp.error_of(format('SELECT jobs.complete(%s, %L, 0)', pg_temp.id('s'), 'w1')), 'JB001 jobs.complete hint=true',
    'complete: the JB001 message names jobs.complete and carries a HINT');
SELECT is(pg_temp.error_of('SELECT jobs.complete(-42, ''w1'', 1)'), 'JB002 jobs.complete hint=true',
    'complete: the JB002 message names jobs.complete and carries a HINT');
SELECT is(pg_temp.error_of('SELECT jobs.complete(-42, '''', 1)'), '22023 jobs.complete hint=true',
    'complete: the 22023 message names jobs.complete and carries a HINT');

-- roles
SET LOCAL ROLE jobs_producer;
SELECT throws_ok($$ SELECT jobs.complete(1, 'w1', 1) $$, '42501', NULL, 'complete: jobs_producer may not complete -> 42501');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
