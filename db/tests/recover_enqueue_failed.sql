-- jobs.recover_enqueue_failed: enqueue_failed -> queued for up to max_jobs jobs, oldest id first,
-- returning (job_id, queue, run_after) signals to push again (docs/design.md §2, §4).
BEGIN;
SELECT plan(20);

SELECT jobs.define_type('ref_t', queue => 'ref_q');
SELECT jobs.define_type('ref_u', queue => 'ref_q2');
CREATE TEMP TABLE j AS
SELECT 'a' AS name, (jobs.submit('ref_t', '{}')).id UNION ALL
SELECT 'b', (jobs.submit('ref_u', '{}', run_after => now() + interval '1 hour')).id UNION ALL
SELECT 'c', (jobs.submit('ref_t', '{}')).id UNION ALL
SELECT 'd', (jobs.submit('ref_t', '{}')).id UNION ALL
SELECT 'queued', (jobs.submit('ref_t', '{}')).id UNION ALL
SELECT 'running', (jobs.submit('ref_t', '{}')).id;
CREATE FUNCTION pg_temp.id(n text) RETURNS bigint LANGUAGE sql AS $$ SELECT id FROM j WHERE name = n $$;
SELECT jobs.claim(pg_temp.id('running'), 'w');
-- Mark out of id order: recovery order is by id, not by when they were marked.
SELECT jobs.mark_enqueue_failed(ARRAY[pg_temp.id('d'), pg_temp.id('c')]);
SELECT jobs.mark_enqueue_failed(ARRAY[pg_temp.id('b'), pg_temp.id('a')]);
UPDATE jobs.job SET updated_at = now() - interval '1 minute' WHERE id IN (SELECT id FROM j);
CREATE TEMP TABLE before_rows AS SELECT * FROM jobs.job WHERE id IN (SELECT id FROM j);

-- Bad max_jobs -> 22023, nothing changed.
CREATE TEMP TABLE snap AS SELECT md5(string_agg(j::text, ',' ORDER BY j.id)) AS h, (SELECT count(*) FROM jobs.history) AS e FROM jobs.job AS j;
SELECT throws_ok($$ SELECT * FROM jobs.recover_enqueue_failed(0) $$, '22023', NULL, 'recover_enqueue_failed: max_jobs 0 -> 22023');
SELECT throws_ok($$ SELECT * FROM jobs.recover_enqueue_failed(-5) $$, '22023', NULL, 'recover_enqueue_failed: negative max_jobs -> 22023');
SELECT throws_ok($$ SELECT * FROM jobs.recover_enqueue_failed(NULL) $$, '22023', NULL, 'recover_enqueue_failed: NULL max_jobs -> 22023');
SELECT is((SELECT (md5(string_agg(j::text, ',' ORDER BY j.id)), (SELECT count(*) FROM jobs.history))::text FROM jobs.job AS j),
          (SELECT (h, e)::text FROM snap), 'recover_enqueue_failed: rejected calls recovered nothing and logged nothing');

-- A limited sweep: the two oldest.
CREATE TEMP TABLE r1 AS SELECT s.*, row_number() OVER () AS pos FROM jobs.recover_enqueue_failed(2) AS s;
SELECT is(ARRAY(SELECT job_id FROM r1 ORDER BY pos), ARRAY[pg_temp.id('a'), pg_temp.id('b')],
          'recover_enqueue_failed: max_jobs 2 -> the two oldest ids, oldest first');
SELECT is((SELECT (queue, run_after)::text FROM r1 WHERE job_id = pg_temp.id('a')), ('ref_q', now())::text,
          'recover_enqueue_failed: the signal carries the job''s queue and run_after');
SELECT is((SELECT (queue, run_after)::text FROM r1 WHERE job_id = pg_temp.id('b')), ('ref_q2', now() + interval '1 hour')::text,
          'recover_enqueue_failed: a delayed job''s signal carries its future run_after (for the delayed set)');
SELECT is(ARRAY(SELECT status::text FROM jobs.job WHERE id IN (pg_temp.id('a'), pg_temp.id('b'))), ARRAY['queued', 'queued'],
          'recover_enqueue_failed: the recovered jobs are queued again');
SELECT is((SELECT (lease_version, retry_count, run_after, updated_at)::text FROM jobs.job WHERE id = pg_temp.id('b')),
          (SELECT (lease_version, retry_count, run_after, now())::text FROM before_rows WHERE id = pg_temp.id('b')),
          'recover_enqueue_failed: lease_version, retry_count and run_after are kept, updated_at = now()');
SELECT results_eq($$ SELECT from_status, to_status, lease_version, reason, at FROM jobs.history
                      WHERE job_id = pg_temp.id('a') ORDER BY id DESC LIMIT 1 $$,
                  $$ VALUES ('enqueue_failed'::jobs.status, 'queued'::jobs.status, 0::bigint, 'recovered', now()) $$,
                  'recover_enqueue_failed: logs enqueue_failed -> queued, reason recovered');
SELECT is(ARRAY(SELECT status::text FROM jobs.job WHERE id IN (pg_temp.id('c'), pg_temp.id('d'))),
          ARRAY['enqueue_failed', 'enqueue_failed'], 'recover_enqueue_failed: jobs beyond max_jobs stay enqueue_failed');
SELECT is((SELECT count(*) FROM jobs.claim(pg_temp.id('a'), 'w')), 1::bigint, 'recover_enqueue_failed: a recovered due job is claimable');

-- The default sweep takes the rest; then there is nothing left.
SELECT is(ARRAY(SELECT job_id FROM jobs.recover_enqueue_failed()), ARRAY[pg_temp.id('c'), pg_temp.id('d')],
          'recover_enqueue_failed: the default max_jobs recovers the rest, oldest first');
SELECT is((SELECT count(*) FROM jobs.history WHERE reason = 'recovered' AND job_id IN (SELECT id FROM j)), 4::bigint,
          'recover_enqueue_failed: one recovered event per job');
CREATE TEMP TABLE snap2 AS SELECT md5(string_agg(j::text, ',' ORDER BY j.id)) AS h, (SELECT count(*) FROM jobs.history) AS e FROM jobs.job AS j;
SELECT is_empty($$ SELECT * FROM jobs.recover_enqueue_failed() $$, 'recover_enqueue_failed: nothing enqueue_failed -> zero rows');
SELECT is((SELECT (md5(string_agg(j::text, ',' ORDER BY j.id)), (SELECT count(*) FROM jobs.history))::text FROM jobs.job AS j),
          (SELECT (h, e)::text FROM snap2), 'recover_enqueue_failed: an empty sweep changes nothing');

-- Jobs in other states are never touched.
SELECT is((SELECT j::text FROM jobs.job AS j WHERE j.id = pg_temp.id('queued')),
          (SELECT b::text FROM before_rows AS b WHERE b.id = pg_temp.id('queued')),
          'recover_enqueue_failed: a queued job is untouched');
SELECT is((SELECT j::text FROM jobs.job AS j WHERE j.id = pg_temp.id('running')),
          (SELECT b::text FROM before_rows AS b WHERE b.id = pg_temp.id('running')),
          'recover_enqueue_failed: a processing job is untouched');
SELECT jobs.cancel(pg_temp.id('queued'));
SELECT is_empty($$ SELECT * FROM jobs.recover_enqueue_failed() $$, 'recover_enqueue_failed: a failed job is never recovered');
SELECT is((SELECT status FROM jobs.job WHERE id = pg_temp.id('queued')), 'failed'::jobs.status,
          'recover_enqueue_failed: ... it stays failed');

SELECT * FROM finish();
ROLLBACK;
