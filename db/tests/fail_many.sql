-- pgTAP tests for jobs.fail_many(job_ids, worker, lease_versions, errors, retryable): jobs.fail for a batch.
-- Contract: docs/sql-api.md (fail_many; "Leaving processing"): per-item authority predicate,
-- accepted = false instead of JB001, the retry rule of jobs.fail, one outcome per item in input order.
BEGIN;
SELECT plan(16);
\ir helpers/lease_helpers.psql

DO $$ BEGIN
    PERFORM jobs.define_type('tc.fmany', max_retries => 1, backoff_base => '10 seconds', backoff_max => '10 seconds');
    PERFORM pg_temp.running('retry', 'tc.fmany', 'w1');
    PERFORM pg_temp.running('fatal', 'tc.fmany', 'w1');
    PERFORM pg_temp.running('spent', 'tc.fmany', 'w1');
    PERFORM pg_temp.running('cancel', 'tc.fmany', 'w1');
    PERFORM pg_temp.running('other', 'tc.fmany', 'w2');
    UPDATE jobs.job SET retry_count = 1 WHERE id = pg_temp.id('spent');
    PERFORM jobs.cancel(pg_temp.id('cancel'));
    PERFORM pg_temp.snap(pg_temp.id('other'));
END $$;

CREATE TEMP TABLE out1 AS
SELECT * FROM jobs.fail_many(
    ARRAY[pg_temp.id('retry'), pg_temp.id('fatal'), pg_temp.id('spent'), pg_temp.id('cancel'), pg_temp.id('other'), -7, pg_temp.id('retry')],
    'w1', ARRAY[1, 1, 1, 1, 1, 1, 1]::bigint[],
    ARRAY['HTTP 503', 'bad input', 'again', 'stopped', 'not mine', 'nobody', 'twice'],
    ARRAY[true, false, true, true, true, true, true])
  WITH ORDINALITY AS o(job_id, accepted, status, run_after, wake, ord);

SELECT results_eq($$ SELECT job_id, accepted, status FROM out1 ORDER BY ord $$,
    $$ VALUES (pg_temp.id('retry'), true, 'queued'::jobs.status), (pg_temp.id('fatal'), true, 'failed'),
              (pg_temp.id('spent'), true, 'failed'), (pg_temp.id('cancel'), true, 'failed'),
              (pg_temp.id('other'), false, 'processing'), (-7::bigint, false, NULL), (pg_temp.id('retry'), false, 'queued') $$,
    'fail_many: one outcome per item in input order; accepted only where the worker holds the lease; a repeated id is applied once');
SELECT ok((SELECT run_after BETWEEN now() + interval '5 seconds' AND now() + interval '10 seconds' FROM out1 WHERE ord = 1),
    'fail_many: a retried item is due after its kind''s backoff');
SELECT is(pg_temp.last_event(pg_temp.id('retry')), '(processing,queued,2,w1,retried,"HTTP 503")', 'fail_many: retryable with budget left -> queued, lease_version + 1, event retried');
SELECT is(pg_temp.last_event(pg_temp.id('fatal')), '(processing,failed,1,w1,failed,"bad input")', 'fail_many: not retryable -> failed, event failed');
SELECT is(pg_temp.last_event(pg_temp.id('spent')), '(processing,failed,1,w1,exhausted,again)', 'fail_many: budget spent -> failed, event exhausted');
SELECT is(pg_temp.last_event(pg_temp.id('cancel')), '(processing,failed,1,w1,cancelled,stopped)', 'fail_many: cancel requested -> failed even when retryable, event cancelled');
SELECT results_eq($$ SELECT retry_count, error, owned_by, finished_at IS NOT NULL FROM jobs.job WHERE id = pg_temp.id('fatal') $$,
    $$ VALUES (1, 'bad input'::text, NULL::text, true) $$, 'fail_many: a failed job keeps the error, counts the attempt, clears the owner, is finished');
SELECT is(pg_temp.state(pg_temp.id('other')), pg_temp.snapped(pg_temp.id('other')), 'fail_many: an item held by another worker -> nothing written');
SELECT is((SELECT count(*) FROM jobs.history WHERE job_id = pg_temp.id('retry') AND reason = 'retried'), 1::bigint,
    'fail_many: a repeated id writes one event');

-- wake: the next job of an ordering key, once its head fails for good
DO $$ BEGIN
    PERFORM pg_temp.job('head', 'tc.fmany', '{}', NULL, 'acct:1');
    PERFORM pg_temp.job('next', 'tc.fmany', '{}', NULL, 'acct:1');
    PERFORM jobs.claim(pg_temp.id('head'), 'w1');
END $$;
SELECT results_eq($$ SELECT accepted, wake FROM jobs.fail_many(ARRAY[pg_temp.id('head')], 'w1', ARRAY[1]::bigint[], ARRAY['no'], ARRAY[false]) $$,
    $$ VALUES (true, ARRAY[pg_temp.id('next')]) $$, 'fail_many: wake lists the ordering-key successor a failed job releases');

SELECT is_empty($$ SELECT * FROM jobs.fail_many('{}', 'w1', '{}', '{}', '{}') $$, 'fail_many: empty arrays -> zero rows');
SELECT throws_ok($$ SELECT * FROM jobs.fail_many(ARRAY[1]::bigint[], 'w1', ARRAY[1, 2]::bigint[], ARRAY['x'], ARRAY[true]) $$,
    '22023', NULL, 'fail_many: arrays of different lengths -> 22023');
SELECT throws_like($$ SELECT * FROM jobs.fail_many(ARRAY[1, 2]::bigint[], 'w1', ARRAY[1, 1]::bigint[], ARRAY['x', ' '], ARRAY[true, true]) $$,
    '%item 1%', 'fail_many: an empty error -> 22023 naming the item');
SELECT throws_ok($$ SELECT * FROM jobs.fail_many(ARRAY[1]::bigint[], 'w1', ARRAY[1]::bigint[], ARRAY['x'], ARRAY[NULL]::boolean[]) $$,
    '22023', NULL, 'fail_many: a NULL retryable -> 22023');
SELECT throws_ok($$ SELECT * FROM jobs.fail_many(ARRAY[1]::bigint[], '', ARRAY[1]::bigint[], ARRAY['x'], ARRAY[true]) $$,
    '22023', NULL, 'fail_many: an empty worker -> 22023');
SELECT throws_ok($$ SELECT * FROM jobs.fail_many(NULL, 'w1', NULL, NULL, NULL) $$, '22023', NULL, 'fail_many: NULL arrays -> 22023');

SELECT * FROM finish();
ROLLBACK;
