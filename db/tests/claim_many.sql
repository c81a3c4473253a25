-- pgTAP tests for jobs.claim_many(job_ids, worker, queues): claims those of the ids that are claimable now
-- (and in one of the worker's queues), skips the rest.
-- Contract: docs/design.md §2 (queued -> processing), §4 (claimable; SETOF jobs.lease), §5.
BEGIN;
SELECT plan(37);
-- Shared helpers (temporary objects, gone with the ROLLBACK).
\ir helpers/lease_helpers.psql

DO $$ BEGIN
    PERFORM jobs.define_type('tc.cm', queue => 'tc.cm.q');
    PERFORM pg_temp.job('a', 'tc.cm', '{"i": "a"}');
    PERFORM pg_temp.job('b', 'tc.cm', '{"i": "b"}');
    PERFORM pg_temp.job('later', 'tc.cm', '{}', now() + interval '1 hour');
    PERFORM pg_temp.running('held', 'tc.cm', 'w0');
    PERFORM pg_temp.job('o1', 'tc.cm', '{}', NULL, 'tc.cm:1');
    PERFORM pg_temp.job('o2', 'tc.cm', '{}', NULL, 'tc.cm:1');
    PERFORM pg_temp.job('ef', 'tc.cm');
    PERFORM jobs.mark_enqueue_failed(ARRAY[pg_temp.id('ef')]);
    PERFORM pg_temp.snap(pg_temp.id('later'));
    PERFORM pg_temp.snap(pg_temp.id('held'));
    PERFORM pg_temp.snap(pg_temp.id('o2'));
    PERFORM pg_temp.snap(pg_temp.id('ef'));
END $$;

CREATE TEMP TABLE got AS
SELECT * FROM jobs.claim_many(
    ARRAY[pg_temp.id('b'), pg_temp.id('later'), -7, pg_temp.id('held'), pg_temp.id('a'),
          pg_temp.id('o2'), pg_temp.id('o1'), pg_temp.id('ef'), pg_temp.id('b')], 'w1');

SELECT bag_eq($$ SELECT job_id FROM got $$,
    $$ VALUES (pg_temp.id('a')), (pg_temp.id('b')), (pg_temp.id('o1')) $$,
    'claim_many: claims exactly the claimable ids, once each (duplicates, unknown, not-due, held, blocked, enqueue_failed skipped)');
SELECT results_eq(
    $$ SELECT job_id, lease_version, kind, queue, payload, attempt, lease_expires_at, timeout_at FROM got WHERE job_id = pg_temp.id('a') $$,
    $$ VALUES (pg_temp.id('a'), 1::bigint, 'tc.cm'::text, 'tc.cm.q'::text, '{"i": "a"}'::jsonb, 1,
               now() + interval '15 seconds', now() + interval '30 seconds') $$,
    'claim_many: each lease carries lease_version 1, kind, queue, payload, attempt 1, lease and timeout ends');
SELECT results_eq(
    $$ SELECT id, status, owned_by, lease_version, claimed_at FROM jobs.job
        WHERE id IN (pg_temp.id('a'), pg_temp.id('b'), pg_temp.id('o1')) ORDER BY id $$,
    $$ SELECT v.id, 'processing'::jobs.status, 'w1'::text, 1::bigint, now()
         FROM unnest(ARRAY[pg_temp.id('a'), pg_temp.id('b'), pg_temp.id('o1')]) AS v(id) ORDER BY v.id $$,
    'claim_many: claimed rows -> processing, owned_by worker, lease_version 1, claimed_at now');
SELECT results_eq(
    $$ SELECT job_id, from_status, to_status, lease_version, worker, reason FROM jobs.history
        WHERE job_id IN (pg_temp.id('a'), pg_temp.id('b'), pg_temp.id('o1')) AND reason = 'claimed' ORDER BY job_id $$,
    $$ SELECT v.id, 'queued'::jobs.status, 'processing'::jobs.status, 1::bigint, 'w1'::text, 'claimed'::text
         FROM unnest(ARRAY[pg_temp.id('a'), pg_temp.id('b'), pg_temp.id('o1')]) AS v(id) ORDER BY v.id $$,
    'claim_many: one claimed event per claimed job, even when the id was passed twice');
SELECT is(pg_temp.state(pg_temp.id('later')), pg_temp.snapped(pg_temp.id('later')), 'claim_many: skipped not-due job -> row unchanged');
SELECT is(pg_temp.state(pg_temp.id('held')), pg_temp.snapped(pg_temp.id('held')), 'claim_many: skipped job held by another worker -> row unchanged');
SELECT is(pg_temp.state(pg_temp.id('o2')), pg_temp.snapped(pg_temp.id('o2')), 'claim_many: blocked ordering-key job passed with its predecessor -> not claimed, row unchanged');
SELECT is(pg_temp.state(pg_temp.id('ef')), pg_temp.snapped(pg_temp.id('ef')), 'claim_many: skipped enqueue_failed job -> row unchanged');

-- duplicate delivery of the whole batch to another worker
DO $$ BEGIN PERFORM pg_temp.snap(pg_temp.id('a')); PERFORM pg_temp.snap(pg_temp.id('b')); END $$;
SELECT is_empty($$ SELECT * FROM jobs.claim_many(ARRAY[pg_temp.id('a'), pg_temp.id('b')], 'w2') $$,
    'claim_many: ids already claimed -> zero rows');
SELECT is(pg_temp.state(pg_temp.id('a')) || pg_temp.state(pg_temp.id('b')),
          pg_temp.snapped(pg_temp.id('a')) || pg_temp.snapped(pg_temp.id('b')),
    'claim_many: duplicate batch -> rows and events unchanged');
SELECT is_empty($$ SELECT * FROM jobs.claim_many(ARRAY[pg_temp.id('a')], 'w1') $$,
    'claim_many: same worker claims its own job again -> zero rows');

-- empty and bad input
SELECT is_empty($$ SELECT * FROM jobs.claim_many('{}', 'w1') $$, 'claim_many: empty array -> zero rows');
DO $$ BEGIN PERFORM pg_temp.job('c', 'tc.cm'); PERFORM pg_temp.snap(pg_temp.id('c')); END $$;
SELECT throws_ok($$ SELECT * FROM jobs.claim_many(NULL, 'w1') $$, '22023', NULL, 'claim_many: NULL job_ids -> 22023');
SELECT throws_ok($$ SELECT * FROM jobs.claim_many(ARRAY[pg_temp.id('c')], '') $$, '22023', NULL, 'claim_many: empty worker -> 22023');
SELECT throws_ok($$ SELECT * FROM jobs.claim_many(ARRAY[pg_temp.id('c')], NULL) $$, '22023', NULL, 'claim_many: NULL worker -> 22023');
SELECT is(pg_temp.state(pg_temp.id('c')), pg_temp.snapped(pg_temp.id('c')), 'claim_many: rejected call -> row and events unchanged');
SELECT results_eq($$ SELECT job_id, lease_version FROM jobs.claim_many(ARRAY[pg_temp.id('c'), NULL], 'w3') $$,
    $$ VALUES (pg_temp.id('c'), 1::bigint) $$, 'claim_many: a NULL element is skipped, the others claimed');

-- the successor becomes claimable once its predecessor ended
SELECT is((jobs.complete(pg_temp.id('o1'), 'w1', 1)).wake, ARRAY[pg_temp.id('o2')], 'claim_many: completing o1 wakes o2');
SELECT results_eq($$ SELECT job_id, lease_version, attempt FROM jobs.claim_many(ARRAY[pg_temp.id('o2')], 'w2') $$,
    $$ VALUES (pg_temp.id('o2'), 1::bigint, 1) $$, 'claim_many: ordering-key successor claimable after its predecessor is done');

SELECT is(pg_temp.error_of($$ SELECT * FROM jobs.claim_many(NULL, 'w1') $$), '22023 jobs.claim_many hint=true',
    'claim_many: the 22023 message names jobs.claim_many and carries a HINT');

-- a worker's queues: an id of another queue's job (pushed into the wrong ready list) is a no-op
-- claim, leaving the job queued and untouched for its own queue's workers.
DO $$ BEGIN
    PERFORM jobs.define_type('tc.cm.billing', queue => 'tc.cm.billing');
    PERFORM pg_temp.job('bill', 'tc.cm.billing');
    PERFORM pg_temp.job('mine', 'tc.cm');
    PERFORM pg_temp.snap(pg_temp.id('bill'));
END $$;
SELECT results_eq(format($$ SELECT job_id FROM jobs.claim_many(ARRAY[%s, %s], 'w3', queues => ARRAY['tc.cm.q']) $$,
                         pg_temp.id('bill'), pg_temp.id('mine')),
    format('VALUES (%s::bigint)', pg_temp.id('mine')),
    'claim_many: with the worker''s queues, only their jobs are granted (another queue''s id is skipped)');
SELECT is(pg_temp.state(pg_temp.id('bill')), pg_temp.snapped(pg_temp.id('bill')), 'claim_many: ... and the other queue''s job is untouched (row and events)');
SELECT is_empty(format($$ SELECT * FROM jobs.claim(%s, 'w3', queues => ARRAY['tc.cm.q', 'elsewhere']) $$, pg_temp.id('bill')),
    'claim: another queue''s job -> zero rows');
SELECT is_empty(format($$ SELECT * FROM jobs.claim_many_with_token(ARRAY[%s], 'w3', queues => ARRAY['tc.cm.q']) $$, pg_temp.id('bill')),
    'claim_many_with_token: another queue''s job -> zero rows');
SELECT is_empty(format($$ SELECT * FROM jobs.claim_with_token(%s, 'w3', queues => '{}') $$, pg_temp.id('bill')),
    'claim_with_token: no queues at all -> zero rows');
SELECT is(pg_temp.state(pg_temp.id('bill')), pg_temp.snapped(pg_temp.id('bill')), 'claims refused by queue change nothing');
SELECT results_eq(format($$ SELECT job_id FROM jobs.claim_many_with_token(ARRAY[%s], 'w4', queues => ARRAY['tc.cm.billing']) $$,
                         pg_temp.id('bill')),
    format('VALUES (%s::bigint)', pg_temp.id('bill')), 'claim_many_with_token: its own queue''s worker claims it');

-- One batch across queues: NULL queues means every queue, a list means those only.
DO $$ BEGIN
    PERFORM jobs.define_type('tc.cm.mix1', queue => 'tc.cm.mix1');
    PERFORM jobs.define_type('tc.cm.mix2', queue => 'tc.cm.mix2');
    PERFORM pg_temp.job('m1', 'tc.cm.mix1');
    PERFORM pg_temp.job('m2', 'tc.cm.mix2');
    PERFORM pg_temp.job('m3', 'tc.cm.mix1');
    PERFORM pg_temp.job('m4', 'tc.cm.mix2');
END $$;
SELECT set_eq(format($$ SELECT job_id, queue FROM jobs.claim_many(ARRAY[%s, %s], 'w5', queues => NULL) $$,
                     pg_temp.id('m1'), pg_temp.id('m2')),
    format($$ VALUES (%s::bigint, 'tc.cm.mix1'), (%s::bigint, 'tc.cm.mix2') $$, pg_temp.id('m1'), pg_temp.id('m2')),
    'claim_many: NULL queues on a batch of two queues claims both');
SELECT set_eq(format($$ SELECT job_id FROM jobs.claim_many_with_token(ARRAY[%s, %s], 'w5', queues => ARRAY['tc.cm.mix2']) $$,
                     pg_temp.id('m3'), pg_temp.id('m4')),
    format('VALUES (%s::bigint)', pg_temp.id('m4')),
    'claim_many_with_token: a queue list on a mixed batch claims that queue''s jobs only');
SELECT is((SELECT status FROM jobs.job WHERE id = pg_temp.id('m3')), 'queued'::jobs.status,
    'claim_many_with_token: the other queue''s job stays queued, untouched');

-- unclaimed: why ids were not granted, for the worker's counts and warnings.
SELECT set_eq(format($$ SELECT job_id, cause FROM jobs.unclaimed(ARRAY[%s, -7, %s, %s, -7, NULL], ARRAY['tc.cm.q']) $$,
                         pg_temp.id('bill'), pg_temp.id('later'), pg_temp.id('mine')),
    format($$ VALUES (-7::bigint, 'unknown'), (%s, 'not_claimable'), (%s, 'not_claimable'), (%s, 'other_queue') $$,
           pg_temp.id('later'), pg_temp.id('mine'), pg_temp.id('bill')),
    'unclaimed: unknown ids, another queue''s jobs and the rest, one row per distinct id');
SELECT is((SELECT cause FROM jobs.unclaimed(ARRAY[pg_temp.id('bill')])), 'not_claimable', 'unclaimed: no queues -> no other_queue');
DO $$ BEGIN
    PERFORM pg_temp.job('due', 'tc.cm');
    PERFORM pg_temp.job('k1', 'tc.cm', '{}', NULL, 'tc.cm:2');
    PERFORM pg_temp.job('k2', 'tc.cm', '{}', NULL, 'tc.cm:2');
END $$;
SELECT is((SELECT cause FROM jobs.unclaimed(ARRAY[pg_temp.id('due')], ARRAY['tc.cm.q'])), 'passed_over',
    'unclaimed: a job claimable now -> passed_over (its signal is worth giving back)');
SELECT set_eq(format($$ SELECT job_id, cause FROM jobs.unclaimed(ARRAY[%s, %s]) $$, pg_temp.id('k1'), pg_temp.id('k2')),
    format($$ VALUES (%s::bigint, 'passed_over'), (%s, 'not_claimable') $$, pg_temp.id('k1'), pg_temp.id('k2')),
    'unclaimed: a queued job behind its ordering key is not_claimable (what unblocks it signals it)');
SELECT is((SELECT cause FROM jobs.unclaimed(ARRAY[pg_temp.id('m3')], ARRAY['tc.cm.q'])), 'other_queue',
    'unclaimed: another queue''s queued job is other_queue, not passed_over');
SELECT throws_ok($$ SELECT * FROM jobs.unclaimed(ARRAY(SELECT generate_series(1, 10001)::bigint)) $$, '22023', NULL,
    'unclaimed: more than 10000 ids -> 22023');

-- roles
SET LOCAL ROLE jobs_producer;
SELECT throws_ok($$ SELECT * FROM jobs.claim_many(ARRAY[1::bigint], 'w1') $$, '42501', NULL, 'claim_many: jobs_producer may not claim -> 42501');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
