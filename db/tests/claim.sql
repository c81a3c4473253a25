-- pgTAP tests for jobs.claim(job_id, worker): queued -> processing for one job, zero rows when not claimable.
-- Contract: docs/design.md §2 (queued -> processing, lease_version += 1), §4 (claimable, lease), §5.
BEGIN;
SELECT plan(45);
-- Shared helpers (temporary objects, gone with the ROLLBACK).
\ir helpers/lease_helpers.psql

DO $$ BEGIN
    PERFORM jobs.define_type('tc.claim', queue => 'tc.claim.q', lease_timeout => '15 seconds', timeout => '30 seconds');
    -- lease_timeout longer than the execution timeout: the lease stops at the timeout
    PERFORM jobs.define_type('tc.claim.short', queue => 'tc.claim.q', lease_timeout => '60 seconds', timeout => '10 seconds');
    PERFORM pg_temp.job('a', 'tc.claim', '{"n": 1}');
END $$;

-- the one legal transition
SELECT results_eq(
    $$ SELECT * FROM jobs.claim(pg_temp.id('a'), 'w1') $$,
    $$ VALUES (pg_temp.id('a'), 1::bigint, 'tc.claim'::text, 'tc.claim.q'::text, '{"n": 1}'::jsonb, 1,
               now() + interval '15 seconds', now() + interval '30 seconds') $$,
    'claim: queued due job -> one lease (lease_version 1, attempt 1, lease = now + lease_timeout, timeout_at = now + timeout)');
SELECT results_eq(
    $$ SELECT status, owned_by, lease_version, claimed_at, lease_expires_at, retry_count, finished_at, updated_at
         FROM jobs.job WHERE id = pg_temp.id('a') $$,
    $$ VALUES ('processing'::jobs.status, 'w1'::text, 1::bigint, now(), now() + interval '15 seconds', 0, NULL::timestamptz, now()) $$,
    'claim: row -> processing, owned_by worker, lease_version 1, claimed_at now, lease_expires_at now + lease_timeout');
SELECT is(pg_temp.last_event(pg_temp.id('a')), '(queued,processing,1,w1,claimed,)',
    'claim: logs queued -> processing, lease_version 1, worker, reason claimed');
SELECT is(pg_temp.nevents(pg_temp.id('a')), 2::bigint, 'claim: exactly one event appended (submitted + claimed)');

-- duplicate claims: zero rows, nothing written
SELECT pg_temp.snap(pg_temp.id('a'));
SELECT is_empty($$ SELECT * FROM jobs.claim(pg_temp.id('a'), 'w1') $$,
    'claim: same worker claims again -> zero rows, no error');
SELECT is(pg_temp.state(pg_temp.id('a')), pg_temp.snapped(pg_temp.id('a')),
    'claim: repeated claim by the same worker -> row and events unchanged');
SELECT is_empty($$ SELECT * FROM jobs.claim(pg_temp.id('a'), 'w2') $$,
    'claim: another worker claims a processing job -> zero rows (duplicate Redis delivery is harmless)');
SELECT is(pg_temp.state(pg_temp.id('a')), pg_temp.snapped(pg_temp.id('a')),
    'claim: duplicate claim by another worker -> row and events unchanged');

-- an expired lease that nobody reaped is still held: not claimable
SELECT pg_temp.elapse(pg_temp.id('a'), '20 seconds');
SELECT pg_temp.snap(pg_temp.id('a'));
SELECT is_empty($$ SELECT * FROM jobs.claim(pg_temp.id('a'), 'w2') $$,
    'claim: processing job with an expired but unreaped lease -> zero rows');
SELECT is(pg_temp.state(pg_temp.id('a')), pg_temp.snapped(pg_temp.id('a')),
    'claim: expired-lease job -> row unchanged, still owned by w1');

-- not due
DO $$ BEGIN PERFORM pg_temp.job('later', 'tc.claim', '{}', now() + interval '1 hour'); END $$;
SELECT pg_temp.snap(pg_temp.id('later'));
SELECT is_empty($$ SELECT * FROM jobs.claim(pg_temp.id('later'), 'w1') $$,
    'claim: job with run_after in the future -> zero rows');
SELECT is(pg_temp.state(pg_temp.id('later')), pg_temp.snapped(pg_temp.id('later')),
    'claim: not-due job -> row and events unchanged');
UPDATE jobs.job SET run_after = now() WHERE id = pg_temp.id('later');
SELECT is((SELECT count(*) FROM jobs.claim(pg_temp.id('later'), 'w1')), 1::bigint,
    'claim: the same job once run_after <= now -> one lease');

-- unknown id
SELECT is_empty($$ SELECT * FROM jobs.claim(-42, 'w1') $$, 'claim: unknown job id -> zero rows, no error');
SELECT is_empty($$ SELECT * FROM jobs.claim(NULL, 'w1') $$, 'claim: NULL job id -> zero rows');

-- blocked by an older unfinished job of the same ordering key
DO $$ BEGIN
    PERFORM pg_temp.job('o1', 'tc.claim', '{}', NULL, 'tc.claim:1');
    PERFORM pg_temp.job('o2', 'tc.claim', '{}', NULL, 'tc.claim:1');
    PERFORM pg_temp.snap(pg_temp.id('o2'));
END $$;
SELECT is_empty($$ SELECT * FROM jobs.claim(pg_temp.id('o2'), 'w1') $$,
    'claim: younger job of an ordering key while the older one is queued -> zero rows');
SELECT is(pg_temp.state(pg_temp.id('o2')), pg_temp.snapped(pg_temp.id('o2')),
    'claim: blocked ordering-key job -> row and events unchanged');
SELECT is((SELECT lease_version FROM jobs.claim(pg_temp.id('o1'), 'w1')), 1::bigint,
    'claim: the oldest job of an ordering key is claimable');
SELECT is_empty($$ SELECT * FROM jobs.claim(pg_temp.id('o2'), 'w2') $$,
    'claim: younger job of an ordering key while the older one is processing -> zero rows');
SELECT is((jobs.complete(pg_temp.id('o1'), 'w1', 1)).wake, ARRAY[pg_temp.id('o2')],
    'claim: completing the older job wakes the younger one');
SELECT is((SELECT job_id FROM jobs.claim(pg_temp.id('o2'), 'w2')), pg_temp.id('o2'),
    'claim: younger ordering-key job once the older one is done -> one lease');

-- a fan-in coordinator waits for its children
DO $$ BEGIN
    INSERT INTO ids SELECT 'coord', (jobs.fan_out('[{"kind": "tc.claim"}]', '{"kind": "tc.claim"}')).id;
    INSERT INTO ids SELECT 'child', j.id FROM jobs.job AS j WHERE j.parent_id = pg_temp.id('coord');
    PERFORM pg_temp.snap(pg_temp.id('coord'));
END $$;
SELECT is_empty($$ SELECT * FROM jobs.claim(pg_temp.id('coord'), 'w1') $$,
    'claim: coordinator with a pending child -> zero rows');
SELECT is(pg_temp.state(pg_temp.id('coord')), pg_temp.snapped(pg_temp.id('coord')),
    'claim: blocked coordinator -> row and events unchanged');
SELECT is((SELECT lease_version FROM jobs.claim(pg_temp.id('child'), 'w1')), 1::bigint,
    'claim: the child of a fan-out is claimable at once');
SELECT is((jobs.complete(pg_temp.id('child'), 'w1', 1)).wake, ARRAY[pg_temp.id('coord')],
    'claim: completing the last child wakes the coordinator');
SELECT is((SELECT job_id FROM jobs.claim(pg_temp.id('coord'), 'w1')), pg_temp.id('coord'),
    'claim: coordinator once every child is terminal -> one lease');

-- other states: enqueue_failed, done, failed
DO $$ BEGIN
    PERFORM pg_temp.job('ef', 'tc.claim');
    PERFORM jobs.mark_enqueue_failed(ARRAY[pg_temp.id('ef')]);
    PERFORM pg_temp.snap(pg_temp.id('ef'));
    PERFORM pg_temp.running('dn', 'tc.claim', 'w1');
    PERFORM jobs.complete(pg_temp.id('dn'), 'w1', 1);
    PERFORM pg_temp.snap(pg_temp.id('dn'));
    PERFORM pg_temp.job('fl', 'tc.claim');
    PERFORM jobs.cancel(pg_temp.id('fl'));
    PERFORM pg_temp.snap(pg_temp.id('fl'));
END $$;
SELECT is_empty($$ SELECT * FROM jobs.claim(pg_temp.id('ef'), 'w1') $$, 'claim: enqueue_failed job -> zero rows');
SELECT is(pg_temp.state(pg_temp.id('ef')), pg_temp.snapped(pg_temp.id('ef')), 'claim: enqueue_failed job -> row and events unchanged');
SELECT is_empty($$ SELECT * FROM jobs.claim(pg_temp.id('dn'), 'w2') $$, 'claim: done job -> zero rows');
SELECT is(pg_temp.state(pg_temp.id('dn')), pg_temp.snapped(pg_temp.id('dn')), 'claim: done job -> row and events unchanged');
SELECT is_empty($$ SELECT * FROM jobs.claim(pg_temp.id('fl'), 'w1') $$, 'claim: failed job -> zero rows');
SELECT is(pg_temp.state(pg_temp.id('fl')), pg_temp.snapped(pg_temp.id('fl')), 'claim: failed job -> row and events unchanged');

-- a retried job: attempt = retry_count + 1, lease_version keeps growing
DO $$ BEGIN
    PERFORM pg_temp.running('r', 'tc.claim', 'w1');
    PERFORM jobs.fail(pg_temp.id('r'), 'w1', 1, 'boom');
    UPDATE jobs.job SET run_after = now() WHERE id = pg_temp.id('r');  -- the backoff has passed
END $$;
SELECT results_eq(
    $$ SELECT job_id, lease_version, attempt FROM jobs.claim(pg_temp.id('r'), 'w2') $$,
    $$ VALUES (pg_temp.id('r'), 3::bigint, 2) $$,
    'claim: retried job -> lease_version 3 (claim, requeue, claim) and attempt 2');

-- the lease never reaches past the execution timeout
DO $$ BEGIN PERFORM pg_temp.job('short', 'tc.claim.short'); END $$;
SELECT results_eq(
    $$ SELECT lease_expires_at, timeout_at FROM jobs.claim(pg_temp.id('short'), 'w1') $$,
    $$ VALUES (now() + interval '10 seconds', now() + interval '10 seconds') $$,
    'claim: lease_timeout longer than timeout -> lease_expires_at = claimed_at + timeout');

-- bad worker ids: 22023 and nothing written
DO $$ BEGIN PERFORM pg_temp.job('bad', 'tc.claim'); PERFORM pg_temp.snap(pg_temp.id('bad')); END $$;
SELECT throws_ok($$ SELECT * FROM jobs.claim(pg_temp.id('bad'), '') $$, '22023', NULL,
    'claim: empty worker -> 22023');
SELECT throws_ok($$ SELECT * FROM jobs.claim(pg_temp.id('bad'), NULL) $$, '22023', NULL,
    'claim: NULL worker -> 22023');
SELECT throws_ok($$ SELECT * FROM jobs.claim(pg_temp.id('bad'), '   ') $$, '22023', NULL,
    'claim: blank worker -> 22023');
SELECT throws_ok($$ SELECT * FROM jobs.claim(pg_temp.id('bad'), repeat('w', 201)) $$, '22023', NULL,
    'claim: worker id over 200 characters -> 22023');
SELECT is(pg_temp.state(pg_temp.id('bad')), pg_temp.snapped(pg_temp.id('bad')),
    'claim: rejected worker ids -> row and events unchanged');
SELECT is((SELECT count(*) FROM jobs.claim(pg_temp.id('bad'), repeat('w', 200))), 1::bigint,
    'claim: worker id of exactly 200 characters is accepted');

SELECT is(pg_temp.error_of($$ SELECT * FROM jobs.claim(1, '') $$), '22023 jobs.claim hint=true',
    'claim: the 22023 message names jobs.claim and carries a HINT');

-- an older job of the key stuck in enqueue_failed still blocks its successor; a failed one does not
DO $$ BEGIN
    PERFORM pg_temp.job('e1', 'tc.claim', '{}', NULL, 'tc.claim:2');
    PERFORM pg_temp.job('e2', 'tc.claim', '{}', NULL, 'tc.claim:2');
    PERFORM jobs.mark_enqueue_failed(ARRAY[pg_temp.id('e1')]);
END $$;
SELECT is_empty($$ SELECT * FROM jobs.claim(pg_temp.id('e2'), 'w1') $$,
    'claim: younger job of an ordering key while the older one is enqueue_failed -> zero rows');
DO $$ BEGIN PERFORM jobs.cancel(pg_temp.id('e1')); END $$;
SELECT is((SELECT count(*) FROM jobs.claim(pg_temp.id('e2'), 'w1')), 1::bigint,
    'claim: younger job of an ordering key once the older one failed -> one lease');

-- roles
SET LOCAL ROLE jobs_producer;
SELECT throws_ok($$ SELECT * FROM jobs.claim(1, 'w1') $$, '42501', NULL, 'claim: jobs_producer may not claim -> 42501');
RESET ROLE;
SET LOCAL ROLE jobs_worker;
SELECT lives_ok($$ SELECT * FROM jobs.claim(-1, 'w1') $$, 'claim: jobs_worker may claim');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
