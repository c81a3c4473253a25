-- pgTAP tests for jobs.heartbeat(job_id, worker, lease_version): extend a held lease, report alive / cancel_requested.
-- Contract: docs/design.md §2 (authority predicate), §4 (heartbeat: never past claimed_at + timeout,
-- alive = false once reached, expired-but-unreaped lease still succeeds), §5 (JB001, JB002, 22023).
BEGIN;
SELECT plan(38);
-- Shared helpers (temporary objects, gone with the ROLLBACK).
\ir helpers/lease_helpers.psql

DO $$ BEGIN
    PERFORM jobs.define_type('tc.hb', lease_timeout => '15 seconds', timeout => '30 seconds');
    PERFORM pg_temp.running('a', 'tc.hb', 'w1');
    PERFORM pg_temp.elapse(pg_temp.id('a'), '10 seconds');   -- claimed 10 s ago, lease ends in 5 s
    PERFORM pg_temp.snap(pg_temp.id('a'));
END $$;

SELECT results_eq($$ SELECT * FROM jobs.heartbeat(pg_temp.id('a'), 'w1', 1) $$,
    $$ VALUES (true, false, now() + interval '15 seconds') $$,
    'heartbeat: held lease 10 s into a 30 s timeout -> alive, no cancel, lease extended to now + lease_timeout');
SELECT results_eq(
    $$ SELECT status, owned_by, lease_version, claimed_at, lease_expires_at, updated_at FROM jobs.job WHERE id = pg_temp.id('a') $$,
    $$ VALUES ('processing'::jobs.status, 'w1'::text, 1::bigint, now() - interval '10 seconds', now() + interval '15 seconds', now()) $$,
    'heartbeat: row keeps status, owner, lease_version and claimed_at; only lease_expires_at moves');
SELECT is(pg_temp.nevents(pg_temp.id('a')), 2::bigint, 'heartbeat: is not a transition -> no event appended');
SELECT results_eq($$ SELECT * FROM jobs.heartbeat(pg_temp.id('a'), 'w1', 1) $$,
    $$ VALUES (true, false, now() + interval '15 seconds') $$,
    'heartbeat: repeated at the same instant -> same answer (idempotent)');

-- capped at claimed_at + timeout
SELECT pg_temp.elapse(pg_temp.id('a'), '10 seconds');        -- claimed 20 s ago
SELECT results_eq($$ SELECT * FROM jobs.heartbeat(pg_temp.id('a'), 'w1', 1) $$,
    $$ VALUES (true, false, now() + interval '10 seconds') $$,
    'heartbeat: 20 s into a 30 s timeout -> lease only up to claimed_at + timeout (now + 10 s), still alive');
SELECT is((SELECT lease_expires_at = claimed_at + interval '30 seconds' FROM jobs.job WHERE id = pg_temp.id('a')), true,
    'heartbeat: stored lease_expires_at = claimed_at + timeout, never past it');
SELECT pg_temp.elapse(pg_temp.id('a'), '10 seconds');        -- claimed 30 s ago: timeout reached
SELECT results_eq($$ SELECT * FROM jobs.heartbeat(pg_temp.id('a'), 'w1', 1) $$,
    $$ VALUES (false, false, now()) $$,
    'heartbeat: execution timeout reached -> alive false, lease not extended past claimed_at + timeout');
SELECT pg_temp.elapse(pg_temp.id('a'), '5 seconds');         -- 35 s: past the timeout, not reaped yet
SELECT results_eq($$ SELECT * FROM jobs.heartbeat(pg_temp.id('a'), 'w1', 1) $$,
    $$ VALUES (false, false, now() - interval '5 seconds') $$,
    'heartbeat: past the timeout -> alive false and the lease stays expired');
SELECT is((SELECT lease_expires_at = claimed_at + interval '30 seconds' FROM jobs.job WHERE id = pg_temp.id('a')), true,
    'heartbeat: past the timeout -> lease_expires_at still claimed_at + timeout');
SELECT is((SELECT count(*) FROM jobs.reap() WHERE job_id = pg_temp.id('a')), 1::bigint,
    'heartbeat: a job that kept heartbeating past its timeout is still reaped');

-- expired lease that nobody reaped yet: still the holder's
DO $$ BEGIN
    PERFORM pg_temp.running('x', 'tc.hb', 'w1');
    PERFORM pg_temp.elapse(pg_temp.id('x'), '16 seconds');   -- lease ended 1 s ago
END $$;
SELECT results_eq($$ SELECT * FROM jobs.heartbeat(pg_temp.id('x'), 'w1', 1) $$,
    $$ VALUES (true, false, now() + interval '14 seconds') $$,
    'heartbeat: expired but unreaped lease -> succeeds, lease extended (capped at claimed_at + timeout)');
SELECT is((SELECT (status, owned_by, lease_version)::text FROM jobs.job WHERE id = pg_temp.id('x')), '(processing,w1,1)',
    'heartbeat: expired lease renewed -> still processing, same owner and lease_version');
SELECT is_empty($$ SELECT * FROM jobs.reap() WHERE job_id = pg_temp.id('x') $$,
    'heartbeat: a renewed lease is not reaped');

-- cancel requested
DO $$ BEGIN PERFORM pg_temp.running('c', 'tc.hb', 'w1'); PERFORM jobs.cancel(pg_temp.id('c')); END $$;
SELECT results_eq($$ SELECT alive, cancel_requested FROM jobs.heartbeat(pg_temp.id('c'), 'w1', 1) $$,
    $$ VALUES (true, true) $$, 'heartbeat: cancel requested on a running job -> cancel_requested true, alive true');
SELECT is((SELECT status FROM jobs.job WHERE id = pg_temp.id('c')), 'processing'::jobs.status,
    'heartbeat: cancel-requested job stays processing until the worker ends it');

-- authority predicate: JB001, nothing written
DO $$ BEGIN PERFORM pg_temp.running('s', 'tc.hb', 'w1'); PERFORM pg_temp.snap(pg_temp.id('s')); END $$;
SELECT throws_ok($$ SELECT jobs.heartbeat(pg_temp.id('s'), 'w1', 0) $$, 'JB001', NULL, 'heartbeat: stale (smaller) lease_version -> JB001');
SELECT throws_ok($$ SELECT jobs.heartbeat(pg_temp.id('s'), 'w1', 2) $$, 'JB001', NULL, 'heartbeat: future lease_version -> JB001');
SELECT throws_ok($$ SELECT jobs.heartbeat(pg_temp.id('s'), 'w2', 1) $$, 'JB001', NULL, 'heartbeat: another worker -> JB001');
SELECT is(pg_temp.state(pg_temp.id('s')), pg_temp.snapped(pg_temp.id('s')), 'heartbeat: rejected heartbeats -> row and events unchanged');

-- the lease was lost: reaped, requeued by fail, reassigned, finished
DO $$ BEGIN
    PERFORM pg_temp.running('r', 'tc.hb', 'w1');
    PERFORM pg_temp.elapse(pg_temp.id('r'), '16 seconds');
    PERFORM jobs.reap();
    PERFORM pg_temp.snap(pg_temp.id('r'));
END $$;
SELECT throws_ok($$ SELECT jobs.heartbeat(pg_temp.id('r'), 'w1', 1) $$, 'JB001', NULL, 'heartbeat: reaped job, old lease -> JB001');
SELECT is(pg_temp.state(pg_temp.id('r')), pg_temp.snapped(pg_temp.id('r')), 'heartbeat: reaped job -> row unchanged (still queued)');
DO $$ BEGIN PERFORM jobs.claim(pg_temp.id('r'), 'w2'); PERFORM pg_temp.snap(pg_temp.id('r')); END $$;
SELECT throws_ok($$ SELECT jobs.heartbeat(pg_temp.id('r'), 'w1', 1) $$, 'JB001', NULL, 'heartbeat: job reassigned to another worker, old lease -> JB001');
SELECT is(pg_temp.state(pg_temp.id('r')), pg_temp.snapped(pg_temp.id('r')), 'heartbeat: reassigned job -> new owner''s row unchanged');
SELECT results_eq($$ SELECT alive FROM jobs.heartbeat(pg_temp.id('r'), 'w2', 3) $$, $$ VALUES (true) $$,
    'heartbeat: the new owner with lease_version 3 -> accepted');
DO $$ BEGIN
    PERFORM pg_temp.running('q', 'tc.hb', 'w1');
    PERFORM jobs.fail(pg_temp.id('q'), 'w1', 1, 'boom');
    PERFORM pg_temp.snap(pg_temp.id('q'));
    PERFORM pg_temp.running('d', 'tc.hb', 'w1');
    PERFORM jobs.complete(pg_temp.id('d'), 'w1', 1);
    PERFORM pg_temp.snap(pg_temp.id('d'));
    PERFORM pg_temp.job('u', 'tc.hb');
    PERFORM pg_temp.snap(pg_temp.id('u'));
END $$;
SELECT throws_ok($$ SELECT jobs.heartbeat(pg_temp.id('q'), 'w1', 1) $$, 'JB001', NULL, 'heartbeat: job requeued by fail -> JB001');
SELECT is(pg_temp.state(pg_temp.id('q')), pg_temp.snapped(pg_temp.id('q')), 'heartbeat: requeued job -> row unchanged');
SELECT throws_ok($$ SELECT jobs.heartbeat(pg_temp.id('d'), 'w1', 1) $$, 'JB001', NULL, 'heartbeat: done job -> JB001');
SELECT is(pg_temp.state(pg_temp.id('d')), pg_temp.snapped(pg_temp.id('d')), 'heartbeat: done job -> row unchanged');
SELECT throws_ok($$ SELECT jobs.heartbeat(pg_temp.id('u'), 'w1', 0) $$, 'JB001', NULL, 'heartbeat: queued job never claimed -> JB001');
SELECT is(pg_temp.state(pg_temp.id('u')), pg_temp.snapped(pg_temp.id('u')), 'heartbeat: unclaimed job -> row unchanged');
SELECT throws_ok($$ SELECT jobs.heartbeat(-42, 'w1', 1) $$, 'JB002', NULL, 'heartbeat: unknown job -> JB002');

-- bad worker ids
SELECT throws_ok($$ SELECT jobs.heartbeat(pg_temp.id('s'), '', 1) $$, '22023', NULL, 'heartbeat: empty worker -> 22023');
SELECT throws_ok($$ SELECT jobs.heartbeat(pg_temp.id('s'), NULL, 1) $$, '22023', NULL, 'heartbeat: NULL worker -> 22023');
SELECT is(pg_temp.state(pg_temp.id('s')), pg_temp.snapped(pg_temp.id('s')), 'heartbeat: rejected worker ids -> row unchanged');

SELECT is(pg_temp.error_of(format('SELECT jobs.heartbeat(%s, %L, 0)', pg_temp.id('s'), 'w1')), 'JB001 jobs.heartbeat hint=true',
    'heartbeat: the JB001 message names jobs.heartbeat and carries a HINT');
SELECT is(pg_temp.error_of('SELECT jobs.heartbeat(-42, ''w1'', 1)'), 'JB002 jobs.heartbeat hint=true',
    'heartbeat: the JB002 message names jobs.heartbeat and carries a HINT');

-- roles
SET LOCAL ROLE jobs_producer;
SELECT throws_ok($$ SELECT jobs.heartbeat(1, 'w1', 1) $$, '42501', NULL, 'heartbeat: jobs_producer may not heartbeat -> 42501');
RESET ROLE;

-- A heartbeat never moves a lease earlier: one that already runs later than this beat would
-- give (here set by hand, as a longer lease from an earlier definition would) keeps its end.
DO $$ BEGIN
    PERFORM jobs.define_type('tc.hb_later', lease_timeout => '10 seconds', timeout => '1 hour');
    PERFORM pg_temp.running('never_earlier', 'tc.hb_later', 'w1');
    UPDATE jobs.job SET lease_expires_at = now() + interval '30 minutes' WHERE id = pg_temp.id('never_earlier');
END $$;
CREATE TEMP TABLE heartbeat_later AS SELECT jobs.heartbeat(pg_temp.id('never_earlier'), 'w1', 1);
SELECT is((SELECT lease_expires_at FROM jobs.job WHERE id = pg_temp.id('never_earlier')), now() + interval '30 minutes',
          'heartbeat: a beat never moves lease_expires_at earlier (10 s from now would be earlier than the 30 min it has)');

SELECT * FROM finish();
ROLLBACK;
