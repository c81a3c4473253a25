-- pgTAP tests for jobs.complete_many(job_ids, worker, lease_versions, results): per-item processing -> done.
-- Contract: docs/design.md §2 (authority predicate per item, accepted = false), §4 (outcome, wake), §5, §8.2.
BEGIN;
SELECT plan(45);
-- Shared helpers (temporary objects, gone with the ROLLBACK).
\ir helpers/lease_helpers.psql

DO $$ BEGIN
    PERFORM jobs.define_type('tc.cmany');
    PERFORM pg_temp.running('a', 'tc.cmany', 'w1');
    PERFORM pg_temp.running('b', 'tc.cmany', 'w1');
    PERFORM pg_temp.running('c', 'tc.cmany', 'w1');
    PERFORM pg_temp.running('d', 'tc.cmany', 'w2');
    PERFORM pg_temp.job('q', 'tc.cmany');
    PERFORM pg_temp.snap(pg_temp.id('b'));
    PERFORM pg_temp.snap(pg_temp.id('d'));
    PERFORM pg_temp.snap(pg_temp.id('q'));
END $$;

-- items: a ok, b stale lease_version, unknown id, c ok, d held by w2, q queued, a again
CREATE TEMP TABLE out1 AS
SELECT * FROM jobs.complete_many(
    ARRAY[pg_temp.id('a'), pg_temp.id('b'), -42, pg_temp.id('c'), pg_temp.id('d'), pg_temp.id('q'), pg_temp.id('a')],
    'w1', ARRAY[1, 0, 1, 1, 1, 0, 1]::bigint[],
    ARRAY['{"r": "a"}', '{"r": "b"}', '{"r": "x"}', '{"r": "c"}', '{"r": "d"}', '{"r": "q"}', '{"r": "a2"}']::jsonb[])
  WITH ORDINALITY AS o(job_id, accepted, status, run_after, wake, ord);

SELECT results_eq($$ SELECT job_id, accepted FROM out1 ORDER BY ord $$,
    $$ VALUES (pg_temp.id('a'), true), (pg_temp.id('b'), false), (-42::bigint, false), (pg_temp.id('c'), true),
              (pg_temp.id('d'), false), (pg_temp.id('q'), false), (pg_temp.id('a'), false) $$,
    'complete_many: one outcome per item in input order; accepted only where the worker holds that lease (a repeated id counts once)');
SELECT results_eq($$ SELECT status FROM out1 ORDER BY ord $$,
    $$ VALUES ('done'::jobs.status), ('processing'), (NULL), ('done'), ('processing'), ('queued'), ('done') $$,
    'complete_many: each outcome reports the job''s status after the call (NULL for an unknown id)');
SELECT is((SELECT count(*) FROM out1 WHERE wake = '{}'), 7::bigint, 'complete_many: wake is an empty array (never NULL) when nothing was woken');
SELECT results_eq($$ SELECT id, status, result, finished_at, owned_by, lease_version FROM jobs.job WHERE id IN (pg_temp.id('a'), pg_temp.id('c')) ORDER BY id $$,
    $$ VALUES (pg_temp.id('a'), 'done'::jobs.status, '{"r": "a"}'::jsonb, now(), 'w1'::text, 1::bigint),
              (pg_temp.id('c'), 'done'::jobs.status, '{"r": "c"}'::jsonb, now(), 'w1'::text, 1::bigint) $$,
    'complete_many: accepted items -> done with their own result (first occurrence), finished_at now, lease_version unchanged');
SELECT results_eq($$ SELECT job_id, (from_status, to_status, lease_version, worker, reason)::text FROM jobs.history
                      WHERE job_id IN (pg_temp.id('a'), pg_temp.id('c')) AND reason = 'completed' ORDER BY job_id $$,
    $$ VALUES (pg_temp.id('a'), '(processing,done,1,w1,completed)'), (pg_temp.id('c'), '(processing,done,1,w1,completed)') $$,
    'complete_many: exactly one completed event per accepted job');
SELECT is(pg_temp.state(pg_temp.id('b')), pg_temp.snapped(pg_temp.id('b')), 'complete_many: stale lease_version item -> nothing written');
SELECT is(pg_temp.state(pg_temp.id('d')), pg_temp.snapped(pg_temp.id('d')), 'complete_many: item held by another worker -> nothing written');
SELECT is(pg_temp.state(pg_temp.id('q')), pg_temp.snapped(pg_temp.id('q')), 'complete_many: queued item -> nothing written');

-- the whole batch again (duplicate delivery): nothing accepted, nothing written
DO $$ BEGIN PERFORM pg_temp.snap(pg_temp.id('a')); PERFORM pg_temp.snap(pg_temp.id('c')); END $$;
SELECT results_eq($$ SELECT job_id, accepted, status FROM jobs.complete_many(ARRAY[pg_temp.id('c'), pg_temp.id('a')], 'w1', ARRAY[1, 1]::bigint[], NULL) $$,
    $$ VALUES (pg_temp.id('c'), false, 'done'::jobs.status), (pg_temp.id('a'), false, 'done'::jobs.status) $$,
    'complete_many: repeated completion -> accepted false for every item, input order kept');
SELECT is(pg_temp.state(pg_temp.id('a')) || pg_temp.state(pg_temp.id('c')), pg_temp.snapped(pg_temp.id('a')) || pg_temp.snapped(pg_temp.id('c')),
    'complete_many: repeated completion -> rows and events unchanged');

-- results NULL; d's rightful owner
SELECT results_eq($$ SELECT job_id, accepted, status FROM jobs.complete_many(ARRAY[pg_temp.id('d')], 'w2', ARRAY[1]::bigint[], NULL) $$,
    $$ VALUES (pg_temp.id('d'), true, 'done'::jobs.status) $$, 'complete_many: results NULL -> accepted');
SELECT is((SELECT result FROM jobs.job WHERE id = pg_temp.id('d')), NULL::jsonb, 'complete_many: results NULL -> result NULL');
SELECT is_empty($$ SELECT * FROM jobs.complete_many('{}', 'w1', '{}', '{}') $$, 'complete_many: empty arrays -> zero rows');

-- reaped job in a batch
DO $$ BEGIN
    PERFORM pg_temp.running('r', 'tc.cmany', 'w1');
    PERFORM pg_temp.running('e', 'tc.cmany', 'w1');
    PERFORM pg_temp.elapse(pg_temp.id('r'), '16 seconds');
    PERFORM jobs.reap();
    PERFORM pg_temp.snap(pg_temp.id('r'));
END $$;
SELECT results_eq($$ SELECT job_id, accepted FROM jobs.complete_many(ARRAY[pg_temp.id('r'), pg_temp.id('e')], 'w1', ARRAY[1, 1]::bigint[], NULL) $$,
    $$ VALUES (pg_temp.id('r'), false), (pg_temp.id('e'), true) $$,
    'complete_many: reaped item -> accepted false, the other item of the batch still accepted');
SELECT is(pg_temp.state(pg_temp.id('r')), pg_temp.snapped(pg_temp.id('r')), 'complete_many: reaped item -> nothing written');

-- the same job twice in one batch, first with a stale lease, then with the held one: the
-- second item satisfies the authority predicate and must be accepted (only stale items are refused)
DO $$ BEGIN PERFORM pg_temp.running('twice', 'tc.cmany', 'w1'); END $$;
SELECT results_eq($$ SELECT job_id, accepted, status FROM jobs.complete_many(ARRAY[pg_temp.id('twice'), pg_temp.id('twice')], 'w1', ARRAY[0, 1]::bigint[], ARRAY['{"v": 0}', '{"v": 1}']::jsonb[]) $$,
    $$ VALUES (pg_temp.id('twice'), false, 'done'::jobs.status), (pg_temp.id('twice'), true, 'done'::jobs.status) $$,
    'complete_many: stale item then the valid item for the same job -> stale one refused, valid one accepted');
SELECT results_eq($$ SELECT status, result FROM jobs.job WHERE id = pg_temp.id('twice') $$,
    $$ VALUES ('done'::jobs.status, '{"v": 1}'::jsonb) $$,
    'complete_many: the job is done with the valid item''s result');

-- wake arrays, per item
DO $$ BEGIN
    PERFORM pg_temp.job('o1', 'tc.cmany', '{}', NULL, 'cm:key');
    PERFORM pg_temp.job('o2', 'tc.cmany', '{}', NULL, 'cm:key');
    INSERT INTO ids SELECT 'coord', (jobs.fan_out('[{"kind": "tc.cmany"}, {"kind": "tc.cmany"}]', '{"kind": "tc.cmany"}')).id;
    INSERT INTO ids SELECT 'child' || row_number() OVER (ORDER BY j.id), j.id FROM jobs.job AS j WHERE j.parent_id = pg_temp.id('coord');
    PERFORM jobs.claim_many(ARRAY[pg_temp.id('o1'), pg_temp.id('child1'), pg_temp.id('child2')], 'w1');
    PERFORM pg_temp.running('plain', 'tc.cmany', 'w1');
END $$;
CREATE TEMP TABLE out2 AS
SELECT * FROM jobs.complete_many(ARRAY[pg_temp.id('child2'), pg_temp.id('plain'), pg_temp.id('o1'), pg_temp.id('child1')],
                                  'w1', ARRAY[1, 1, 1, 1]::bigint[], NULL)
  WITH ORDINALITY AS o(job_id, accepted, status, run_after, wake, ord);
SELECT is((SELECT bool_and(accepted) FROM out2), true, 'complete_many: wake batch -> every item accepted');
SELECT is((SELECT wake FROM out2 WHERE ord = 3), ARRAY[pg_temp.id('o2')], 'complete_many: ordering-key head -> its wake lists the successor');
SELECT is((SELECT wake FROM out2 WHERE ord = 2), '{}'::bigint[], 'complete_many: item that woke nothing -> empty wake');
SELECT is((SELECT array_agg(w ORDER BY w) FROM out2, unnest(wake) AS w WHERE job_id IN (pg_temp.id('child1'), pg_temp.id('child2'))),
    ARRAY[pg_temp.id('coord')], 'complete_many: both children in one batch -> the coordinator is listed exactly once');
SELECT results_eq($$ SELECT job_id FROM jobs.claim_many(ARRAY[pg_temp.id('o2'), pg_temp.id('coord')], 'w1') $$,
    $$ VALUES (pg_temp.id('o2')), (pg_temp.id('coord')) $$, 'complete_many: woken jobs are claimable');

-- bad input: 22023 and nothing written
DO $$ BEGIN PERFORM pg_temp.running('v', 'tc.cmany', 'w1'); PERFORM pg_temp.snap(pg_temp.id('v')); END $$;
SELECT throws_ok($$ SELECT * FROM jobs.complete_many(ARRAY[pg_temp.id('v')], 'w1', ARRAY[1, 2]::bigint[], NULL) $$, '22023', NULL,
    'complete_many: lease_versions of another length -> 22023');
SELECT throws_ok($$ SELECT * FROM jobs.complete_many(ARRAY[pg_temp.id('v')], 'w1', ARRAY[1]::bigint[], ARRAY['{}', '{}']::jsonb[]) $$, '22023', NULL,
    'complete_many: results of another length -> 22023');
SELECT throws_ok($$ SELECT * FROM jobs.complete_many(NULL, 'w1', ARRAY[1]::bigint[], NULL) $$, '22023', NULL, 'complete_many: NULL job_ids -> 22023');
SELECT throws_ok($$ SELECT * FROM jobs.complete_many(ARRAY[pg_temp.id('v')], 'w1', NULL, NULL) $$, '22023', NULL, 'complete_many: NULL lease_versions -> 22023');
SELECT throws_ok($$ SELECT * FROM jobs.complete_many(ARRAY[pg_temp.id('v')], '', ARRAY[1]::bigint[], NULL) $$, '22023', NULL, 'complete_many: empty worker -> 22023');
-- A result number beyond the IEEE-754 double range: no reader could decode the job (22003).
DO $$ BEGIN PERFORM pg_temp.running('v2', 'tc.cmany', 'w1'); PERFORM pg_temp.snap(pg_temp.id('v2')); END $$;
SELECT throws_ok(format($f$ SELECT * FROM jobs.complete_many(ARRAY[%s, %s], 'w1', ARRAY[1, 1]::bigint[], ARRAY['{"ok": 1}', '{"n": [1e5000]}']::jsonb[]) $f$,
                        pg_temp.id('v'), pg_temp.id('v2')), '22003',
    'jobs.complete_many: item 1: the result holds a number beyond the IEEE-754 double range (greater than 1.7976931348623157e308 in magnitude)',
    'complete_many: a result holding 1e5000 -> 22003 naming the item');
SELECT is(pg_temp.error_of(format('SELECT jobs.complete(%s, %L, 1, %L)', pg_temp.id('v2'), 'w1', '-1e309')), '22003 jobs.complete hint=true',
    'complete: a bare result of -1e309 -> 22003');
SELECT throws_ok(format($f$ SELECT * FROM jobs.complete_many(ARRAY[%s], 'w1', ARRAY[1]::bigint[], ARRAY[jsonb_build_object('n', 1e400, 'pad', repeat('x', 2000000))]) $f$,
                        pg_temp.id('v2')), '22023', NULL, 'complete_many: a result over 1 MiB is refused for its size first -> 22023');
SELECT is(pg_temp.state(pg_temp.id('v')), pg_temp.snapped(pg_temp.id('v')), 'complete_many: rejected calls -> row and events unchanged');
SELECT is(pg_temp.state(pg_temp.id('v2')), pg_temp.snapped(pg_temp.id('v2')), 'complete_many: ... for each item');
SELECT is((SELECT accepted FROM jobs.complete_many(ARRAY[pg_temp.id('v2')], 'w1', ARRAY[1]::bigint[], ARRAY['{"n": 1.7976931348623157e308}']::jsonb[])),
    true, 'complete_many: the largest double is a result like any other');
SELECT is((SELECT result FROM jobs.job WHERE id = pg_temp.id('v2')), '{"n": 1.7976931348623157e308}'::jsonb,
    'complete_many: ... stored as given');

SELECT is(pg_temp.error_of($$ SELECT * FROM jobs.complete_many(ARRAY[1::bigint], 'w1', '{}', NULL) $$), '22023 jobs.complete_many hint=true',
    'complete_many: the 22023 message names jobs.complete_many and carries a HINT');

-- A refused item is decided once. finish_leases decides again only the items whose row changed
-- under its UPDATE (a concurrent writer's commit: the isolation specs); an item that does not
-- hold its lease is left out of the decision at once, not carried round after round (up to
-- ten) for the UPDATE's re-check to refuse each time. Rounds are counted through jobs.tally,
-- which finish_leases calls once a round.
SET LOCAL track_functions = 'pl';
CREATE FUNCTION pg_temp.rounds(stmt text) RETURNS bigint LANGUAGE plpgsql AS $f$
DECLARE
    tally regprocedure := 'jobs.tally(text[], text[], boolean[], double precision[], double precision[], double precision[], integer[], bigint[])';
    before bigint := (SELECT coalesce(sum(calls), 0) FROM pg_stat_xact_user_functions WHERE funcid = tally);
BEGIN
    EXECUTE stmt;
    RETURN (SELECT coalesce(sum(calls), 0) FROM pg_stat_xact_user_functions WHERE funcid = tally) - before;
END $f$;
-- held is a running job, ended one completed: four refusals, each decided in one round.
CREATE FUNCTION pg_temp.refused_in_one_round(held text, ended text, label text) RETURNS SETOF text
LANGUAGE plpgsql AS $f$
DECLARE
    call text := 'SELECT * FROM jobs.complete_many(ARRAY[%s], %L, ARRAY[%s]::bigint[], NULL)';
BEGIN
    PERFORM pg_temp.running(held, 'tc.cmany', 'w1');
    PERFORM pg_temp.running(ended, 'tc.cmany', 'w1');
    PERFORM jobs.complete(pg_temp.id(ended), 'w1', 1);
    RETURN NEXT is(pg_temp.rounds(format(call, pg_temp.id(ended), 'w1', 1)), 1::bigint,
        label || ': an item whose lease has ended (the job is done) is refused in one round');
    RETURN NEXT is(pg_temp.rounds(format(call, pg_temp.id(held), 'w2', 1)), 1::bigint,
        label || ': an item naming another worker is refused in one round');
    RETURN NEXT is(pg_temp.rounds(format(call, pg_temp.id(held), 'w1', 0)), 1::bigint,
        label || ': a stale lease_version is refused in one round');
    RETURN NEXT is(pg_temp.rounds(format(call, pg_temp.id(ended) || ', ' || pg_temp.id(held), 'w1', '1, 1')), 1::bigint,
        label || ': a held lease beside a refused one: one round for both');
END $f$;
SELECT * FROM pg_temp.refused_in_one_round('once', 'ended', 'complete_many');

-- The same with lease binding off, where a completion takes finish_leases' general statement
-- (with binding on, a worker's completions take the one for done verdicts, which has no
-- rounds: it reads nothing before its UPDATE).
UPDATE jobs.lease_policy SET bind_session_role = false;
SELECT * FROM pg_temp.refused_in_one_round('once_g', 'ended_g', 'complete_many, binding off');
SELECT is((SELECT status::text FROM jobs.job WHERE id = pg_temp.id('once_g')), 'done',
    'complete_many, binding off: ... and the held one is done');
UPDATE jobs.lease_policy SET bind_session_role = true;

-- roles
SET LOCAL ROLE jobs_producer;
SELECT throws_ok($$ SELECT * FROM jobs.complete_many(ARRAY[1::bigint], 'w1', ARRAY[1::bigint], NULL) $$, '42501', NULL,
    'complete_many: jobs_producer may not complete -> 42501');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
