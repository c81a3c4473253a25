-- pgTAP tests for global limits per kind: define_type(max_running, rate_limit, rate_period),
-- enforced by every claim (claim, claim_many, claim_next) and jobs.held_back.
-- Contract: docs/sql-api.md "Global limits per kind". The concurrent case (several sessions)
-- is py/tests/test_limits.py.
BEGIN;
SELECT plan(26);
\ir helpers/lease_helpers.psql

-- validation
SELECT throws_ok($$ SELECT jobs.define_type('tc.li.bad', max_running => 0) $$, '22023', NULL,
    'limits: max_running 0 -> 22023');
SELECT throws_ok($$ SELECT jobs.define_type('tc.li.bad', rate_limit => 5) $$, '22023', NULL,
    'limits: rate_limit without rate_period -> 22023');
SELECT throws_ok($$ SELECT jobs.define_type('tc.li.bad', rate_period => '1 second') $$, '22023', NULL,
    'limits: rate_period without rate_limit -> 22023');
SELECT throws_ok($$ SELECT jobs.define_type('tc.li.bad', rate_limit => 0, rate_period => '1 second') $$, '22023', NULL,
    'limits: rate_limit 0 -> 22023');
SELECT throws_ok($$ SELECT jobs.define_type('tc.li.bad', rate_limit => 1, rate_period => '0 seconds') $$, '22023', NULL,
    'limits: rate_period 0 -> 22023');
SELECT is((SELECT count(*) FROM jobs.job_type WHERE kind = 'tc.li.bad'), 0::bigint, 'limits: refused definitions wrote nothing');

DO $$ BEGIN
    PERFORM jobs.define_type('tc.li.free', queue => 'tc.li.q');
    PERFORM jobs.define_type('tc.li.two', queue => 'tc.li.q', max_running => 2);
END $$;
SELECT results_eq($$ SELECT kind, max_running FROM jobs.kind_limit $$, $$ VALUES ('tc.li.two'::text, 2) $$,
    'limits: only the limited kind has a kind_limit row');

-- max_running
DO $$ BEGIN
    PERFORM pg_temp.job('t1', 'tc.li.two'); PERFORM pg_temp.job('t2', 'tc.li.two');
    PERFORM pg_temp.job('t3', 'tc.li.two'); PERFORM pg_temp.job('t4', 'tc.li.two');
    PERFORM pg_temp.job('f1', 'tc.li.free'); PERFORM pg_temp.job('f2', 'tc.li.free');
    -- t4 is the most urgent of the kind
    UPDATE jobs.job SET priority = 0 WHERE id = pg_temp.id('t4');
    UPDATE jobs.job SET priority = 5 WHERE id IN (pg_temp.id('t1'), pg_temp.id('t2'), pg_temp.id('t3'));
    PERFORM pg_temp.snap(pg_temp.id('t2'));
END $$;
SELECT results_eq($$ SELECT job_id FROM jobs.claim_many(ARRAY[pg_temp.id('t1'), pg_temp.id('t2'), pg_temp.id('t3'),
                                                            pg_temp.id('t4'), pg_temp.id('f1')], 'w1') $$,
    $$ VALUES (pg_temp.id('t1')), (pg_temp.id('t4')), (pg_temp.id('f1')) $$,
    'limits: claim_many grants max_running of the kind (most urgent first) and every unlimited id');
SELECT is(pg_temp.state(pg_temp.id('t2')), pg_temp.snapped(pg_temp.id('t2')), 'limits: a held-back job is untouched');
SELECT is_empty($$ SELECT * FROM jobs.claim(pg_temp.id('t2'), 'w2') $$, 'limits: at the limit, claim grants nothing');
SELECT results_eq($$ SELECT job_id FROM jobs.claim_next('w2', ARRAY['tc.li.q'], 10) $$,
    $$ VALUES (pg_temp.id('f2')) $$,
    'limits: claim_next passes a full kind over (none of its jobs) and takes the other kinds'' jobs');
SELECT results_eq($$ SELECT job_id, priority FROM jobs.held_back(ARRAY[pg_temp.id('t2'), pg_temp.id('t3'), pg_temp.id('f1'), -1]) $$,
    $$ VALUES (pg_temp.id('t2'), 5::smallint), (pg_temp.id('t3'), 5::smallint) $$,
    'limits: held_back lists the jobs the limit held back (not the running, nor unknown ids)');
SELECT ok((SELECT bool_and(run_after > now()) FROM jobs.held_back(ARRAY[pg_temp.id('t2'), pg_temp.id('t3')])),
    'limits: ... each with a later time to try again (for the delayed set)');
SELECT is((SELECT accepted FROM jobs.complete(pg_temp.id('t1'), 'w1', pg_temp.lv(pg_temp.id('t1')), '{}')), true,
    'limits: a running job of the kind completes');
SELECT results_eq($$ SELECT job_id FROM jobs.claim_many(ARRAY[pg_temp.id('t2'), pg_temp.id('t3')], 'w2') $$,
    $$ VALUES (pg_temp.id('t2')) $$, 'limits: its slot is free again: one more is granted');
SELECT is((SELECT count(*) FROM jobs.kind_slot WHERE kind = 'tc.li.two'), 2::bigint,
    'limits: the finished lease''s slot was dropped, the new one recorded');
SELECT is((SELECT (jobs.cancel(pg_temp.id('t4'))).accepted), true, 'limits: a running job of the kind is cancelled (cancel requested)');
SELECT is((SELECT accepted FROM jobs.fail(pg_temp.id('t4'), 'w1', pg_temp.lv(pg_temp.id('t4')), 'boom', false)), true,
    'limits: ... and ends');
SELECT results_eq($$ SELECT job_id FROM jobs.claim(pg_temp.id('t3'), 'w2') $$,
    $$ VALUES (pg_temp.id('t3')) $$, 'limits: a failed job''s slot frees too');

-- lifting the limit
DO $$ BEGIN PERFORM jobs.define_type('tc.li.two', queue => 'tc.li.q'); END $$;
SELECT is((SELECT count(*) FROM jobs.kind_limit) + (SELECT count(*) FROM jobs.kind_slot), 0::bigint,
    'limits: redefining the kind without limits removes its rows');

-- a limit set while jobs run counts them
DO $$ BEGIN
    PERFORM pg_temp.running('x1', 'tc.li.free', 'w1');
    PERFORM pg_temp.job('x2', 'tc.li.free');
    PERFORM jobs.define_type('tc.li.free', queue => 'tc.li.q', max_running => 3);
END $$;
SELECT is((SELECT count(*) FROM jobs.kind_slot WHERE kind = 'tc.li.free'), 3::bigint,
    'limits: a new max_running takes a slot for every job of the kind already running');
SELECT is_empty($$ SELECT * FROM jobs.claim(pg_temp.id('x2'), 'w1') $$,
    'limits: ... so the kind is at its limit at once');

-- rate limit: a token bucket of rate_limit, refilled at rate_limit per rate_period
DO $$ BEGIN
    PERFORM jobs.define_type('tc.li.rate', queue => 'tc.li.rq', rate_limit => 3, rate_period => '1 hour');
    PERFORM pg_temp.job('r1', 'tc.li.rate'); PERFORM pg_temp.job('r2', 'tc.li.rate');
    PERFORM pg_temp.job('r3', 'tc.li.rate'); PERFORM pg_temp.job('r4', 'tc.li.rate');
    PERFORM pg_temp.job('r5', 'tc.li.rate');
END $$;
SELECT is((SELECT count(*) FROM jobs.claim_many(ARRAY[pg_temp.id('r1'), pg_temp.id('r2'), pg_temp.id('r3'), pg_temp.id('r4')], 'w1')),
    3::bigint, 'limits: a full bucket grants rate_limit claims');
SELECT is_empty($$ SELECT * FROM jobs.claim_next('w1', ARRAY['tc.li.rq'], 5) $$, 'limits: an empty bucket grants none');
SELECT ok((SELECT run_after BETWEEN now() + interval '19 minutes' AND now() + interval '41 minutes'
             FROM jobs.held_back(ARRAY[pg_temp.id('r4')])),
    'limits: held_back times the retry for when the next token is due (about 20 min at 3 per hour)');
UPDATE jobs.kind_limit SET refilled_at = refilled_at - interval '40 minutes' WHERE kind = 'tc.li.rate';
SELECT is((SELECT count(*) FROM jobs.claim_many(ARRAY[pg_temp.id('r4'), pg_temp.id('r5')], 'w1')), 2::bigint,
    'limits: 40 minutes later two tokens have come back');

SELECT * FROM finish();
ROLLBACK;
