-- Ordering keys: a job is not claimable while an older unfinished job (queued, processing,
-- enqueue_failed) with the same key exists, through claim, claim_many and claim_next; when that
-- job ends the outcome's wake names the next; ordering holds through retries and reaps; cancel
-- of the head wakes the next (docs/design.md §4 "Claimable", decisions "Ordering keys and fan-in").
BEGIN;
SELECT plan(45);

SELECT jobs.define_type('ok_a', queue => 'ok_q', max_retries => 2);
SELECT jobs.define_type('ok_b', queue => 'ok_q2');

-- The key is global: jobs of different kinds and queues share it.
CREATE TEMP TABLE j AS
SELECT 'head' AS name, (jobs.submit('ok_a', '{"n": 1}', ordering_key => 'acct:1')).id UNION ALL
SELECT 'second', (jobs.submit('ok_a', '{"n": 2}', ordering_key => 'acct:1')).id UNION ALL
SELECT 'third', (jobs.submit('ok_b', '{"n": 3}', ordering_key => 'acct:1')).id UNION ALL
SELECT 'other_key', (jobs.submit('ok_a', '{"n": 4}', ordering_key => 'acct:2')).id UNION ALL
SELECT 'no_key', (jobs.submit('ok_b', '{"n": 5}')).id;
CREATE FUNCTION pg_temp.id(n text) RETURNS bigint LANGUAGE sql AS $$ SELECT id FROM j WHERE name = n $$;
CREATE FUNCTION pg_temp.st(n text) RETURNS text LANGUAGE sql AS $$
    SELECT (status, lease_version)::text FROM jobs.job WHERE id = pg_temp.id(n)
$$;
CREATE TEMP TABLE leases (name text, l jobs.lease);

-- blocked on every claim path.
SELECT ok(pg_temp.id('head') < pg_temp.id('second') AND pg_temp.id('second') < pg_temp.id('third'),
          'ordering_key: (fixture) ids follow submit order');
SELECT is_empty($$ SELECT * FROM jobs.claim(pg_temp.id('second'), 'w') $$,
                'ordering_key: claim of the second job while the head is queued -> zero rows');
SELECT is_empty($$ SELECT * FROM jobs.claim_many(ARRAY[pg_temp.id('second'), pg_temp.id('third')], 'w') $$,
                'ordering_key: claim_many of the younger jobs -> zero rows');
SELECT is_empty($$ SELECT * FROM jobs.claim_next('w', ARRAY['ok_q2'], 10) AS l WHERE l.job_id = pg_temp.id('third') $$,
                'ordering_key: claim_next on the third job''s own queue skips it (the key is global across kinds and queues)');
SELECT is(pg_temp.st('third'), '(queued,0)', 'ordering_key: ... the third job is still queued, lease_version 0');
SELECT is(pg_temp.st('no_key'), '(processing,1)', 'ordering_key: ... while claim_next took the job without a key from that queue');
INSERT INTO leases SELECT 'cn', l FROM jobs.claim_next('w', ARRAY['ok_q', 'ok_q2'], 10) AS l;
SELECT set_eq($$ SELECT (l).job_id FROM leases WHERE name = 'cn' $$,
              $$ SELECT pg_temp.id(n) FROM unnest(ARRAY['head', 'other_key']) AS n $$,
              'ordering_key: claim_next over both queues takes the head and the other key''s job, not the blocked ones');
SELECT is(pg_temp.st('second'), '(queued,0)', 'ordering_key: the second job is still queued');
SELECT is_empty($$ SELECT * FROM jobs.claim(pg_temp.id('second'), 'w') $$,
                'ordering_key: a processing head still blocks the second job');

-- the head ends -> its outcome wakes the next.
CREATE TEMP TABLE o_head AS
SELECT * FROM jobs.complete(pg_temp.id('head'), 'w', (SELECT (l).lease_version FROM leases WHERE (l).job_id = pg_temp.id('head')));
SELECT is((SELECT wake FROM o_head), ARRAY[pg_temp.id('second')], 'ordering_key: completing the head -> wake names the second job');
SELECT is_empty($$ SELECT * FROM jobs.claim(pg_temp.id('third'), 'w') $$, 'ordering_key: the third job is still blocked by the second');
INSERT INTO leases SELECT 'second-1', l FROM jobs.claim(pg_temp.id('second'), 'w') AS l;
SELECT is((SELECT count(*) FROM leases WHERE name = 'second-1'), 1::bigint, 'ordering_key: the second job is now claimable');
SELECT is((SELECT wake FROM jobs.complete(pg_temp.id('other_key'), 'w',
                                          (SELECT (l).lease_version FROM leases WHERE (l).job_id = pg_temp.id('other_key')))),
          '{}'::bigint[], 'ordering_key: a job with nobody behind it wakes nothing');

-- retries keep the order.
CREATE TEMP TABLE o_retry AS
SELECT * FROM jobs.fail(pg_temp.id('second'), 'w', (SELECT (l).lease_version FROM leases WHERE name = 'second-1'), 'flaky');
SELECT is((SELECT (status, wake)::text FROM o_retry), ('queued', '{}'::bigint[])::text,
          'ordering_key: fail with budget left requeues the second job and wakes nothing');
SELECT is_empty($$ SELECT * FROM jobs.claim(pg_temp.id('third'), 'w') $$,
                'ordering_key: the third job stays blocked while the second waits for its retry');
UPDATE jobs.job SET run_after = now() WHERE id = pg_temp.id('second');   -- the backoff has passed
SELECT is_empty($$ SELECT * FROM jobs.claim_next('w', ARRAY['ok_q2']) $$,
                'ordering_key: claim_next still skips the third job');
INSERT INTO leases SELECT 'second-2', l FROM jobs.claim_many(ARRAY[pg_temp.id('third'), pg_temp.id('second')], 'w') AS l;
SELECT is(ARRAY(SELECT (l).job_id FROM leases WHERE name = 'second-2'), ARRAY[pg_temp.id('second')],
          'ordering_key: claim_many of both takes only the retried second job');
SELECT is(pg_temp.st('third'), '(queued,0)', 'ordering_key: the third job is untouched');

-- reaps keep the order; the reap that ends the job wakes the next.
UPDATE jobs.job SET lease_expires_at = now() - interval '1 second' WHERE id = pg_temp.id('second');
CREATE TEMP TABLE reap1 AS SELECT * FROM jobs.reap();
SELECT is(ARRAY(SELECT job_id FROM reap1), ARRAY[pg_temp.id('second')],
          'ordering_key: reaping the second job requeues it; the third is not signalled');
SELECT is_empty($$ SELECT * FROM jobs.claim(pg_temp.id('third'), 'w') $$,
                'ordering_key: after the reap the third job is still blocked');
INSERT INTO leases SELECT 'second-3', l FROM jobs.claim(pg_temp.id('second'), 'w') AS l;
SELECT is((SELECT (l).attempt FROM leases WHERE name = 'second-3'), 3, 'ordering_key: the second job runs its third attempt');
UPDATE jobs.job SET lease_expires_at = now() - interval '1 second' WHERE id = pg_temp.id('second');
CREATE TEMP TABLE reap2 AS SELECT * FROM jobs.reap();
SELECT is((SELECT (status, retry_count)::text FROM jobs.job WHERE id = pg_temp.id('second')), '(failed,3)',
          'ordering_key: the last reap fails the second job (budget spent)');
SELECT is(ARRAY(SELECT job_id FROM reap2), ARRAY[pg_temp.id('third')],
          'ordering_key: ... and reap returns the third job, which it made claimable');
SELECT is((SELECT count(*) FROM jobs.claim(pg_temp.id('third'), 'w')), 1::bigint, 'ordering_key: the third job is claimable now');

-- cancel of the head wakes the next; an enqueue_failed head blocks.
CREATE TEMP TABLE c AS
SELECT 'c1' AS name, (jobs.submit('ok_a', '{}', ordering_key => 'acct:3')).id UNION ALL
SELECT 'c2', (jobs.submit('ok_a', '{}', ordering_key => 'acct:3')).id UNION ALL
SELECT 'c3', (jobs.submit('ok_a', '{}', ordering_key => 'acct:3')).id;
INSERT INTO j SELECT * FROM c;
SELECT is(jobs.mark_enqueue_failed(ARRAY[pg_temp.id('c1')]), 1, 'ordering_key: (fixture) the head of acct:3 is enqueue_failed');
SELECT is_empty($$ SELECT * FROM jobs.claim(pg_temp.id('c2'), 'w') $$,
                'ordering_key: an enqueue_failed head blocks the next job');
CREATE TEMP TABLE o_cancel AS SELECT * FROM jobs.cancel(pg_temp.id('c1'));
SELECT is((SELECT (status, wake)::text FROM o_cancel), ('failed', ARRAY[pg_temp.id('c2')])::text,
          'ordering_key: cancelling the head -> failed, wake names the next job');
SELECT is((SELECT wake FROM jobs.cancel(pg_temp.id('c3'))), '{}'::bigint[],
          'ordering_key: cancelling a job behind the head wakes nothing');
SELECT is((SELECT count(*) FROM jobs.claim(pg_temp.id('c2'), 'w')), 1::bigint, 'ordering_key: the next job is claimable after the cancel');
SELECT is((SELECT (status, lease_version)::text FROM jobs.job WHERE id = pg_temp.id('c3')), '(failed,0)',
          'ordering_key: the cancelled younger job is failed and was never leased');

-- a running head that is cancelled ends through fail and then wakes the next.
CREATE TEMP TABLE d AS
SELECT 'd1' AS name, (jobs.submit('ok_a', '{}', ordering_key => 'acct:4')).id UNION ALL
SELECT 'd2', (jobs.submit('ok_a', '{}', ordering_key => 'acct:4')).id;
INSERT INTO j SELECT * FROM d;
INSERT INTO leases SELECT 'd1', l FROM jobs.claim(pg_temp.id('d1'), 'w') AS l;
SELECT is((SELECT wake FROM jobs.cancel(pg_temp.id('d1'))), '{}'::bigint[],
          'ordering_key: cancel of a running head only flags it and wakes nothing');
SELECT is_empty($$ SELECT * FROM jobs.claim(pg_temp.id('d2'), 'w') $$, 'ordering_key: ... the next job stays blocked');
SELECT is((SELECT wake FROM jobs.fail(pg_temp.id('d1'), 'w', (SELECT (l).lease_version FROM leases WHERE name = 'd1'), 'stopped')),
          ARRAY[pg_temp.id('d2')], 'ordering_key: the worker''s fail ends the cancelled head and wakes the next');
SELECT is((SELECT count(*) FROM jobs.claim(pg_temp.id('d2'), 'w')), 1::bigint, 'ordering_key: the next job is claimable');

-- wake lists only jobs that are claimable now.
CREATE TEMP TABLE e AS
SELECT 'e1' AS name, (jobs.submit('ok_a', '{}', ordering_key => 'acct:5')).id UNION ALL
SELECT 'e2', (jobs.submit('ok_a', '{}', run_after => now() + interval '1 hour', ordering_key => 'acct:5')).id;
INSERT INTO j SELECT * FROM e;
INSERT INTO leases SELECT 'e1', l FROM jobs.claim(pg_temp.id('e1'), 'w') AS l;
SELECT is((SELECT wake FROM jobs.complete(pg_temp.id('e1'), 'w', (SELECT (l).lease_version FROM leases WHERE name = 'e1'))),
          '{}'::bigint[], 'ordering_key: a next job that is not due yet is not in wake');
UPDATE jobs.job SET run_after = now() WHERE id = pg_temp.id('e2');
SELECT is((SELECT count(*) FROM jobs.claim(pg_temp.id('e2'), 'w')), 1::bigint, 'ordering_key: ... it is claimable once due (nothing older blocks it)');
SELECT is((SELECT count(*) FROM jobs.history WHERE job_id = pg_temp.id('e2') AND reason = 'claimed'), 1::bigint,
          'ordering_key: ... and was claimed exactly once');

-- a younger job with another key, or none, is never blocked.
CREATE TEMP TABLE f AS
SELECT 'f1' AS name, (jobs.submit('ok_a', '{}', ordering_key => 'acct:6')).id UNION ALL
SELECT 'f2', (jobs.submit('ok_a', '{}', ordering_key => 'acct:7')).id UNION ALL
SELECT 'f3', (jobs.submit('ok_a', '{}')).id;
INSERT INTO j SELECT * FROM f;
SELECT is((SELECT count(*) FROM jobs.claim(pg_temp.id('f2'), 'w')), 1::bigint, 'ordering_key: a job with a different key is not blocked');
SELECT is((SELECT count(*) FROM jobs.claim(pg_temp.id('f3'), 'w')), 1::bigint, 'ordering_key: a job without a key is not blocked');
SELECT is((SELECT count(*) FROM jobs.claim(pg_temp.id('f1'), 'w')), 1::bigint, 'ordering_key: the head of its key is claimable');

-- A replay never runs beside a younger job of its key: the replayed (older) job waits for the
-- running one, is woken when it ends, and runs before the younger ones still queued.
SELECT jobs.define_type('ok_r', queue => 'ok_rq', max_retries => 0);
CREATE TEMP TABLE r AS
SELECT 'old' AS name, (jobs.submit('ok_r', '{}', ordering_key => 'acct:r')).id UNION ALL
SELECT 'young', (jobs.submit('ok_r', '{}', ordering_key => 'acct:r')).id UNION ALL
SELECT 'youngest', (jobs.submit('ok_r', '{}', ordering_key => 'acct:r')).id;
CREATE FUNCTION pg_temp.rid(n text) RETURNS bigint LANGUAGE sql AS $$ SELECT id FROM r WHERE name = n $$;
SELECT jobs.fail(pg_temp.rid('old'), 'w1', (SELECT lease_version FROM jobs.claim(pg_temp.rid('old'), 'w1')), 'boom', false);
SELECT is((SELECT count(*) FROM jobs.claim(pg_temp.rid('young'), 'w2')), 1::bigint, 'ordering_key: the next job runs once the old one failed');
SELECT ok(jobs.replay(pg_temp.rid('old')), 'ordering_key: the failed old job is replayed while the younger one runs');
SELECT is((SELECT count(*) FROM jobs.claim(pg_temp.rid('old'), 'w1')), 0::bigint,
          'ordering_key: the replayed job is not claimable while a younger job of its key runs');
SELECT is((SELECT wake FROM jobs.complete(pg_temp.rid('young'), 'w2', 1, '{}')), ARRAY[pg_temp.rid('old')],
          'ordering_key: the running job''s completion wakes the replayed one');
SELECT is(ARRAY(SELECT id FROM jobs.claimable WHERE ordering_key = 'acct:r'), ARRAY[pg_temp.rid('old')],
          'ordering_key: and only it: the youngest still waits behind it');

SELECT * FROM finish();
ROLLBACK;
