-- pgTAP tests for jobs.claim_next(worker, queues, max_jobs): poll for claimable jobs without Redis.
-- Contract: docs/design.md §4 (claim_next: queues, max_jobs, SKIP LOCKED; claimable), §2, §5.
BEGIN;
SELECT plan(27);
-- Shared helpers (temporary objects, gone with the ROLLBACK).
\ir helpers/lease_helpers.psql

DO $$ BEGIN
    PERFORM jobs.define_type('tc.cn.a', queue => 'tc.cn.qa');
    PERFORM jobs.define_type('tc.cn.b', queue => 'tc.cn.qb');
    PERFORM jobs.define_type('tc.cn.c', queue => 'tc.cn.qc');
    PERFORM jobs.define_type('tc.cn.z', queue => 'tc.cn.qz');
    -- queue a: a2 is due earlier than a1 although its id is larger; a3 is not due
    PERFORM pg_temp.job('a1', 'tc.cn.a');
    PERFORM pg_temp.job('a2', 'tc.cn.a');
    PERFORM pg_temp.job('a3', 'tc.cn.a', '{}', now() + interval '1 hour');
    UPDATE jobs.job SET run_after = now() - interval '5 minutes' WHERE id = pg_temp.id('a1');
    UPDATE jobs.job SET run_after = now() - interval '10 minutes' WHERE id = pg_temp.id('a2');
    -- queues b and c interleave in due time: b1 (-3 min), c1 (-2 min), b2 (-1 min)
    PERFORM pg_temp.job('b1', 'tc.cn.b');
    PERFORM pg_temp.job('b2', 'tc.cn.b');
    PERFORM pg_temp.job('c1', 'tc.cn.c');
    UPDATE jobs.job SET run_after = now() - interval '3 minutes' WHERE id = pg_temp.id('b1');
    UPDATE jobs.job SET run_after = now() - interval '1 minutes' WHERE id = pg_temp.id('b2');
    UPDATE jobs.job SET run_after = now() - interval '2 minutes' WHERE id = pg_temp.id('c1');
    PERFORM pg_temp.snap(pg_temp.id('a3'));
END $$;

SELECT results_eq($$ SELECT job_id, lease_version, queue, attempt FROM jobs.claim_next('w1', ARRAY['tc.cn.qa']) $$,
    $$ VALUES (pg_temp.id('a2'), 1::bigint, 'tc.cn.qa'::text, 1) $$,
    'claim_next: default max_jobs 1 -> the oldest due job of the queue (smallest run_after, not smallest id)');
SELECT results_eq($$ SELECT status, owned_by, lease_version FROM jobs.job WHERE id = pg_temp.id('a2') $$,
    $$ VALUES ('processing'::jobs.status, 'w1'::text, 1::bigint) $$,
    'claim_next: claimed row -> processing, owned by the worker, lease_version 1');
SELECT is(pg_temp.last_event(pg_temp.id('a2')), '(queued,processing,1,w1,claimed,)',
    'claim_next: logs queued -> processing, lease_version 1, worker, claimed');
SELECT results_eq($$ SELECT job_id FROM jobs.claim_next('w1', ARRAY['tc.cn.qa'], 10) $$,
    $$ VALUES (pg_temp.id('a1')) $$,
    'claim_next: next call -> the remaining due job only; the job due in an hour is left');
SELECT is(pg_temp.state(pg_temp.id('a3')), pg_temp.snapped(pg_temp.id('a3')),
    'claim_next: not-due job -> row and events unchanged');
SELECT is_empty($$ SELECT * FROM jobs.claim_next('w1', ARRAY['tc.cn.qa'], 10) $$,
    'claim_next: queue with nothing due -> zero rows');

-- several queues: overall oldest first, limited by max_jobs, other queues untouched
SELECT bag_eq($$ SELECT job_id FROM jobs.claim_next('w2', ARRAY['tc.cn.qb', 'tc.cn.qc'], 2) $$,
    $$ VALUES (pg_temp.id('b1')), (pg_temp.id('c1')) $$,
    'claim_next: two queues, max_jobs 2 -> the two oldest due jobs across both queues');
SELECT is((SELECT status FROM jobs.job WHERE id = pg_temp.id('b2')), 'queued'::jobs.status,
    'claim_next: the younger job beyond max_jobs stays queued');
SELECT results_eq($$ SELECT job_id FROM jobs.claim_next('w2', ARRAY['tc.cn.qc', 'tc.cn.qb', 'tc.cn.qb'], 5) $$,
    $$ VALUES (pg_temp.id('b2')) $$,
    'claim_next: a queue named twice -> each job claimed once');

-- queue filter
DO $$ BEGIN PERFORM pg_temp.job('z1', 'tc.cn.z'); PERFORM pg_temp.snap(pg_temp.id('z1')); END $$;
SELECT is_empty($$ SELECT * FROM jobs.claim_next('w1', ARRAY['tc.cn.qa', 'tc.cn.qb', 'tc.cn.qc'], 10) $$,
    'claim_next: claimable job of another queue -> not returned');
SELECT is(pg_temp.state(pg_temp.id('z1')), pg_temp.snapped(pg_temp.id('z1')), 'claim_next: job of an unlisted queue -> row unchanged');
SELECT is_empty($$ SELECT * FROM jobs.claim_next('w1', ARRAY['tc.cn.nope'], 10) $$, 'claim_next: unknown queue -> zero rows');
SELECT is_empty($$ SELECT * FROM jobs.claim_next('w1', '{}'::text[], 10) $$, 'claim_next: empty queue list -> zero rows');

-- equal run_after: id order
DO $$ BEGIN
    PERFORM pg_temp.job('t1', 'tc.cn.z');
    PERFORM pg_temp.job('t2', 'tc.cn.z');
    UPDATE jobs.job SET run_after = now() - interval '1 hour'
     WHERE id IN (pg_temp.id('t1'), pg_temp.id('t2'), pg_temp.id('z1'));
END $$;
SELECT results_eq($$ SELECT job_id FROM jobs.claim_next('w1', ARRAY['tc.cn.qz'], 2) $$,
    $$ VALUES (pg_temp.id('z1')), (pg_temp.id('t1')) $$,
    'claim_next: equal run_after -> smallest ids first');

-- blocked jobs are skipped: ordering key and fan-in
DO $$ BEGIN
    PERFORM pg_temp.job('k1', 'tc.cn.b', '{}', NULL, 'cn:key');
    PERFORM pg_temp.job('k2', 'tc.cn.b', '{}', NULL, 'cn:key');
    -- the successor looks older than its predecessor: it must still wait
    UPDATE jobs.job SET run_after = now() - interval '1 day' WHERE id = pg_temp.id('k2');
    INSERT INTO ids SELECT 'coord', (jobs.fan_out('[{"kind": "tc.cn.c"}]', '{"kind": "tc.cn.b"}')).id;
    INSERT INTO ids SELECT 'child', j.id FROM jobs.job AS j WHERE j.parent_id = pg_temp.id('coord');
    UPDATE jobs.job SET run_after = now() - interval '1 day' WHERE id = pg_temp.id('coord');
    PERFORM pg_temp.snap(pg_temp.id('k2'));
    PERFORM pg_temp.snap(pg_temp.id('coord'));
END $$;
SELECT bag_eq($$ SELECT job_id FROM jobs.claim_next('w3', ARRAY['tc.cn.qb', 'tc.cn.qc'], 10) $$,
    $$ VALUES (pg_temp.id('k1')), (pg_temp.id('child')) $$,
    'claim_next: ordering-key successor and fan-in coordinator are skipped even when due earlier');
SELECT is(pg_temp.state(pg_temp.id('k2')) || pg_temp.state(pg_temp.id('coord')),
          pg_temp.snapped(pg_temp.id('k2')) || pg_temp.snapped(pg_temp.id('coord')),
    'claim_next: skipped blocked jobs -> rows and events unchanged');

-- queues NULL: every queue
DO $$ BEGIN
    PERFORM pg_temp.job('n1', 'tc.cn.a');
    PERFORM pg_temp.job('n2', 'tc.cn.z');
    PERFORM pg_temp.job('n3', 'tc.cn.b');
    UPDATE jobs.job SET run_after = now() - interval '100 years' WHERE id = pg_temp.id('n2');
    UPDATE jobs.job SET run_after = now() - interval '99 years' WHERE id = pg_temp.id('n1');
    UPDATE jobs.job SET run_after = now() - interval '98 years' WHERE id = pg_temp.id('n3');
END $$;
SELECT bag_eq($$ SELECT job_id FROM jobs.claim_next('w4', NULL, 2) $$,
    $$ VALUES (pg_temp.id('n2')), (pg_temp.id('n1')) $$,
    'claim_next: queues NULL -> the oldest due jobs of any queue, max_jobs of them');
SELECT results_eq($$ SELECT job_id FROM jobs.claim_next('w4') $$, $$ VALUES (pg_temp.id('n3')) $$,
    'claim_next: defaults (all queues, one job) -> the next oldest');

-- bad input
DO $$ BEGIN PERFORM pg_temp.job('bad', 'tc.cn.z'); PERFORM pg_temp.snap(pg_temp.id('bad')); END $$;
SELECT throws_ok($$ SELECT * FROM jobs.claim_next('w1', ARRAY['tc.cn.qz'], 0) $$, '22023', NULL, 'claim_next: max_jobs 0 -> 22023');
SELECT throws_ok($$ SELECT * FROM jobs.claim_next('w1', ARRAY['tc.cn.qz'], -1) $$, '22023', NULL, 'claim_next: negative max_jobs -> 22023');
SELECT throws_ok($$ SELECT * FROM jobs.claim_next('w1', ARRAY['tc.cn.qz'], NULL) $$, '22023', NULL, 'claim_next: NULL max_jobs -> 22023');
SELECT throws_ok($$ SELECT * FROM jobs.claim_next('', ARRAY['tc.cn.qz']) $$, '22023', NULL, 'claim_next: empty worker -> 22023');
SELECT throws_ok($$ SELECT * FROM jobs.claim_next(NULL, ARRAY['tc.cn.qz']) $$, '22023', NULL, 'claim_next: NULL worker -> 22023');
SELECT is(pg_temp.state(pg_temp.id('bad')), pg_temp.snapped(pg_temp.id('bad')), 'claim_next: rejected calls -> row and events unchanged');

SELECT is(pg_temp.error_of($$ SELECT * FROM jobs.claim_next('w1', NULL, 0) $$), '22023 jobs.claim_next hint=true',
    'claim_next: the 22023 message names jobs.claim_next and carries a HINT');

-- roles
SET LOCAL ROLE jobs_producer;
SELECT throws_ok($$ SELECT * FROM jobs.claim_next('w1') $$, '42501', NULL, 'claim_next: jobs_producer may not claim -> 42501');
RESET ROLE;
SET LOCAL ROLE jobs_worker;
SELECT is((SELECT count(*) FROM jobs.claim_next('w5', ARRAY['tc.cn.qz'])), 1::bigint,
    'claim_next: jobs_worker may claim');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
