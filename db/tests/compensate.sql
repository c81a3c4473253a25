-- Compensation (docs/python.md, "Compensating what cannot roll back"): a kind's on_dead kind
-- is submitted in the transaction that dead-letters its job, once per job.
BEGIN;
SELECT plan(11);
SELECT jobs.define_type('cp.refund');
SELECT jobs.define_type('cp.charge', max_retries => 0, on_dead => 'cp.refund');
SELECT jobs.define_type('cp.retry', max_retries => 2, on_dead => 'cp.refund');

SELECT is((SELECT on_dead FROM jobs.job_type WHERE kind = 'cp.charge'), 'cp.refund', 'define_type stores on_dead');
SELECT throws_ok($$ SELECT jobs.define_type('cp.x', on_dead => 'cp.nobody') $$, '22023', NULL,
                 'on_dead naming an undeclared kind is 22023');
SELECT throws_ok($$ SELECT jobs.define_type('cp.refund', on_dead => 'cp.refund') $$, '22023', NULL,
                 'a kind cannot compensate itself');

CREATE TEMP TABLE t AS SELECT (jobs.submit('cp.charge', '{"card": "c1", "cents": 500}', notify => false)).id AS charge,
                              (jobs.submit('cp.retry', notify => false)).id AS retried,
                              (jobs.submit('cp.charge', notify => false)).id AS cancelled;
SELECT jobs.claim(charge, 'w1') FROM t;
SELECT jobs.claim(retried, 'w1') FROM t;
SELECT jobs.fail(retried, 'w1', 1, 'flaky') FROM t;
SELECT jobs.cancel(cancelled) FROM t;
SELECT is((SELECT count(*) FROM jobs.job WHERE kind = 'cp.refund'), 0::bigint,
          'a retried failure and a cancellation submit no compensation');

SAVEPOINT rolled;
SELECT jobs.fail(charge, 'w1', 1, 'card declined') FROM t;
SELECT is((SELECT count(*) FROM jobs.job WHERE kind = 'cp.refund'), 1::bigint, 'a dead letter submits its compensation');
ROLLBACK TO SAVEPOINT rolled;
SELECT is((SELECT count(*) FROM jobs.job WHERE kind = 'cp.refund'), 0::bigint, 'and it goes with a rolled-back failure');

SELECT jobs.fail(charge, 'w1', 1, 'card declined') FROM t;
SELECT is((SELECT payload FROM jobs.job WHERE kind = 'cp.refund'),
          (SELECT jsonb_build_object('dead_job', jsonb_build_object('id', charge, 'kind', 'cp.charge', 'queue', 'default',
                  'error', 'card declined', 'reason', 'exhausted', 'retry_count', 1,
                  'payload', '{"card": "c1", "cents": 500}'::jsonb)) FROM t),
          'the compensation''s payload names the dead job: id, kind, queue, error, reason, retries and its payload');
SELECT is((SELECT row(status, idempotency_key)::text FROM jobs.job WHERE kind = 'cp.refund'),
          (SELECT row('queued', 'compensate:' || charge)::text FROM t), 'it is queued, keyed compensate:<id>');
SELECT is((SELECT count(*) FROM jobs.history AS e JOIN jobs.job AS j ON j.id = e.job_id
            WHERE j.kind = 'cp.refund' AND e.reason = 'submitted'), 1::bigint, 'its submission is in the event log');

-- Replayed, the job dead-letters again: the compensation is not repeated.
SELECT jobs.replay(charge) FROM t;
SELECT jobs.claim(charge, 'w1') FROM t;
SELECT jobs.fail(charge, 'w1', (SELECT lease_version FROM jobs.job, t WHERE id = charge), 'declined again') FROM t;
SELECT is((SELECT status FROM jobs.job, t WHERE id = charge), 'failed'::jobs.status, 'the replayed job dead-lettered again');
SELECT is((SELECT count(*) FROM jobs.job WHERE kind = 'cp.refund'), 1::bigint,
          'a replay that dead-letters again submits no second compensation');
SELECT * FROM finish();
ROLLBACK;
