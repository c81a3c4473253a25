-- pgTAP tests for jobs.heartbeat_many(job_ids, worker, lease_versions): every lease of a worker in one statement.
-- Contract: docs/sql-api.md (heartbeat_many): the rule of jobs.heartbeat per item; held true/false/NULL;
-- never waits on a row lock (the NULL case needs a second session: py/tests/test_sql_batches.py and the
-- isolation spec db/tests/isolation/specs/heartbeat_reap.spec).
BEGIN;
SELECT plan(11);
\ir helpers/lease_helpers.psql

DO $$ BEGIN
    PERFORM jobs.define_type('tc.hbm', lease_timeout => '10 seconds', timeout => '60 seconds');
    PERFORM pg_temp.running('a', 'tc.hbm', 'w1');
    PERFORM pg_temp.running('old', 'tc.hbm', 'w1');
    PERFORM pg_temp.running('late', 'tc.hbm', 'w1');
    PERFORM pg_temp.running('theirs', 'tc.hbm', 'w2');
    PERFORM pg_temp.elapse(pg_temp.id('a'), '5 seconds');
    PERFORM pg_temp.elapse(pg_temp.id('late'), '65 seconds');
    PERFORM jobs.cancel(pg_temp.id('a'));
    PERFORM pg_temp.snap(pg_temp.id('theirs'));
END $$;

CREATE TEMP TABLE beats AS
SELECT * FROM jobs.heartbeat_many(ARRAY[pg_temp.id('a'), pg_temp.id('old'), pg_temp.id('late'), pg_temp.id('theirs'), -3],
                                  'w1', ARRAY[1, 0, 1, 1, 1]::bigint[])
  WITH ORDINALITY AS b(job_id, held, alive, cancel_requested, lease_expires_at, ord);

SELECT results_eq($$ SELECT job_id, held, alive, cancel_requested FROM beats ORDER BY ord $$,
    $$ VALUES (pg_temp.id('a'), true, true, true), (pg_temp.id('old'), false, NULL, NULL),
              (pg_temp.id('late'), true, false, false), (pg_temp.id('theirs'), false, NULL, NULL), (-3::bigint, false, NULL, NULL) $$,
    'heartbeat_many: one row per item in input order: held, alive and cancel_requested as jobs.heartbeat says them');
SELECT is((SELECT lease_expires_at FROM beats WHERE ord = 1), now() + interval '10 seconds',
    'heartbeat_many: a held lease is extended by lease_timeout from now');
SELECT is((SELECT lease_expires_at FROM jobs.job WHERE id = pg_temp.id('a')), now() + interval '10 seconds',
    'heartbeat_many: the extension is written');
SELECT ok((SELECT lease_expires_at <= claimed_at + interval '60 seconds' FROM jobs.job WHERE id = pg_temp.id('late')),
    'heartbeat_many: never past claimed_at + timeout');
SELECT is(pg_temp.state(pg_temp.id('theirs')), pg_temp.snapped(pg_temp.id('theirs')), 'heartbeat_many: another worker''s lease -> nothing written');
SELECT is((SELECT count(*) FROM jobs.history WHERE job_id = pg_temp.id('a') AND reason = 'claimed'), 1::bigint,
    'heartbeat_many: writes no event (a heartbeat is not a transition)');
SELECT is_empty($$ SELECT * FROM jobs.heartbeat_many('{}', 'w1', '{}') $$, 'heartbeat_many: empty arrays -> zero rows');
SELECT throws_ok($$ SELECT * FROM jobs.heartbeat_many(ARRAY[1]::bigint[], 'w1', ARRAY[1, 2]::bigint[]) $$, '22023', NULL,
    'heartbeat_many: arrays of different lengths -> 22023');
SELECT throws_ok($$ SELECT * FROM jobs.heartbeat_many(NULL, 'w1', NULL) $$, '22023', NULL, 'heartbeat_many: NULL arrays -> 22023');
SELECT throws_ok($$ SELECT * FROM jobs.heartbeat_many(ARRAY[1]::bigint[], ' ', ARRAY[1]::bigint[]) $$, '22023', NULL,
    'heartbeat_many: an empty worker -> 22023');

-- A heartbeat never moves a lease earlier: one that already runs later than this beat would
-- give (here set by hand, as a longer lease from an earlier definition would) keeps its end.
DO $$ BEGIN
    PERFORM jobs.define_type('tc.hb_later', lease_timeout => '10 seconds', timeout => '1 hour');
    PERFORM pg_temp.running('never_earlier', 'tc.hb_later', 'w1');
    UPDATE jobs.job SET lease_expires_at = now() + interval '30 minutes' WHERE id = pg_temp.id('never_earlier');
END $$;
CREATE TEMP TABLE heartbeat_many_later AS SELECT * FROM jobs.heartbeat_many(ARRAY[pg_temp.id('never_earlier')], 'w1', ARRAY[1]::bigint[]);
SELECT is((SELECT lease_expires_at FROM jobs.job WHERE id = pg_temp.id('never_earlier')), now() + interval '30 minutes',
          'heartbeat_many: a beat never moves lease_expires_at earlier (10 s from now would be earlier than the 30 min it has)');

SELECT * FROM finish();
ROLLBACK;
