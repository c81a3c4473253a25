-- Dead-letter pages (docs/observability.md, "Dead letters"): written with the failure, held
-- by a claim, retried with backoff until delivered, never given up; pruned only when
-- delivered or never tried.
BEGIN;
SELECT plan(25);

SELECT jobs.define_type('pg.dead', max_retries => 0);
SELECT jobs.define_type('pg.retry', max_retries => 3);

CREATE TEMP TABLE t AS SELECT (jobs.submit('pg.dead', '{"n": 1}', notify => false)).id AS dead_id,
                              (jobs.submit('pg.retry', notify => false)).id AS retry_id,
                              (jobs.submit('pg.dead', notify => false)).id AS cancelled_id;
SELECT jobs.claim(dead_id, 'w1') FROM t;
SELECT jobs.claim(retry_id, 'w1') FROM t;
SELECT jobs.fail(dead_id, 'w1', 1, 'card declined') FROM t;
SELECT jobs.fail(retry_id, 'w1', 1, 'flaky') FROM t;
SELECT jobs.cancel(cancelled_id) FROM t;

SELECT is((SELECT count(*) FROM jobs.page), 1::bigint,
          'a dead letter writes one page; a retried failure and a cancellation write none');
SELECT is((SELECT row(p.job_id, p.kind, p.queue, p.error, p.reason, p.retry_count, p.max_retries, p.attempts, p.delivered_at IS NULL)::text
             FROM jobs.page AS p),
          (SELECT row(dead_id, 'pg.dead', 'default', 'card declined', 'exhausted', 1, 0, 0, true)::text FROM t),
          'the page describes its dead letter by itself: job, kind, queue, error, reason, retries');
SELECT is((SELECT p.failed_at FROM jobs.page AS p), (SELECT j.finished_at FROM jobs.job AS j, t WHERE j.id = t.dead_id),
          'the page records when the job failed');

-- A rolled-back failure pages nobody.
SAVEPOINT before_rollback;
CREATE TEMP TABLE r AS SELECT (jobs.submit('pg.dead', notify => false)).id AS id;
SELECT jobs.claim(id, 'w1') FROM r;
SELECT jobs.fail(id, 'w1', 1, 'boom', false) FROM r;
SELECT is((SELECT count(*) FROM jobs.page), 2::bigint, 'a fatal error is a dead letter too');
ROLLBACK TO SAVEPOINT before_rollback;
SELECT is((SELECT count(*) FROM jobs.page), 1::bigint, 'its page goes with the rollback');

-- Claiming holds a page; settling decides.
SELECT is((SELECT count(*) FROM jobs.claim_pages(10, '30 seconds')), 1::bigint, 'a due page is claimed');
SELECT is((SELECT attempts FROM jobs.page), 1, 'the claim counts an attempt');
SELECT ok((SELECT due_at > now() + interval '29 seconds' FROM jobs.page), 'and holds the page for the hold');
SELECT is((SELECT count(*) FROM jobs.claim_pages(10, '30 seconds')), 0::bigint,
          'a held page is not claimed again while held');
SELECT is(jobs.settle_pages(ARRAY(SELECT id FROM jobs.page), ARRAY['HTTP 503']), 0, 'a failed attempt delivers nothing');
SELECT ok((SELECT delivered_at IS NULL AND last_error = 'HTTP 503'
                  AND due_at BETWEEN now() + interval '0.9 seconds' AND now() + interval '1.1 seconds' FROM jobs.page),
          'a failed attempt keeps the page, with its error, due again after retry_base');
UPDATE jobs.page SET attempts = 4, due_at = now() - interval '1 second';
SELECT is((SELECT count(*) FROM jobs.claim_pages(10, '30 seconds')), 1::bigint, 'a page due again is claimed again');
SELECT jobs.settle_pages(ARRAY(SELECT id FROM jobs.page), ARRAY['timed out'], '1 second', '5 minutes');
SELECT ok((SELECT due_at BETWEEN now() + interval '15.9 seconds' AND now() + interval '16.1 seconds' FROM jobs.page),
          'the backoff doubles per attempt (5th attempt: 16 s)');
UPDATE jobs.page SET attempts = 40, due_at = now() - interval '1 second';
SELECT jobs.claim_pages(10, '30 seconds');
SELECT jobs.settle_pages(ARRAY(SELECT id FROM jobs.page), ARRAY['timed out'], '1 second', '5 minutes');
SELECT ok((SELECT delivered_at IS NULL AND due_at BETWEEN now() + interval '299 seconds' AND now() + interval '301 seconds' FROM jobs.page),
          'however many attempts failed, the page is kept and retried at retry_max');
SELECT is((SELECT row(undelivered, failing)::text FROM jobs.page_backlog()), '(1,1)',
          'page_backlog counts the undelivered page, and that a forwarder tried it');
SELECT is((SELECT count(*) FROM jobs.pages()), 1::bigint, 'jobs.pages lists it');
UPDATE jobs.page SET due_at = now() - interval '1 second';
SELECT jobs.claim_pages(10, '30 seconds');
SELECT is(jobs.settle_pages(ARRAY(SELECT id FROM jobs.page), ARRAY[NULL::text]), 1, 'a 2xx delivers it');
SELECT is(jobs.settle_pages(ARRAY(SELECT id FROM jobs.page), ARRAY['late failure']), 0,
          'settling a delivered page again changes nothing');
SELECT is((SELECT count(*) FROM jobs.claim_pages(10, '30 seconds')), 0::bigint, 'a delivered page is never claimed');
SELECT is((SELECT count(*) FROM jobs.pages(undelivered_only => false)), 1::bigint, 'jobs.pages(false) lists the delivered one');

-- Retention: delivered and never-tried pages go with jobs.prune; a tried one stays.
INSERT INTO jobs.page (job_id, kind, queue, reason, retry_count, max_retries, failed_at, attempts, created_at)
VALUES (-1, 'pg.dead', 'default', 'exhausted', 0, 0, now(), 3, now() - interval '8 days'),
       (-2, 'pg.dead', 'default', 'exhausted', 0, 0, now(), 0, now() - interval '8 days');
UPDATE jobs.page SET created_at = now() - interval '8 days' WHERE delivered_at IS NOT NULL;
SELECT jobs.prune('7 days');
SELECT is((SELECT array_agg(job_id) FROM jobs.page), ARRAY[-1::bigint],
          'prune keeps an undelivered page a forwarder tried, whatever its age');
SELECT is((SELECT count(*) FROM jobs.page WHERE job_id = -2), 0::bigint,
          'prune drops an old page no forwarder ever tried (no webhook configured)');
SELECT is((SELECT count(*) FROM jobs.page WHERE delivered_at IS NOT NULL), 0::bigint,
          'prune drops an old delivered page');

SELECT throws_ok($$ SELECT jobs.claim_pages(0) $$, '22023', NULL, 'max_pages below 1 is 22023');
SELECT throws_ok($$ SELECT jobs.settle_pages(ARRAY[1::bigint], ARRAY[]::text[]) $$, '22023', NULL,
                 'ids and errors of different lengths are 22023');

SELECT * FROM finish();
ROLLBACK;
