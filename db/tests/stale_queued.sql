-- jobs.stale_queued: claimable jobs of one queue whose updated_at and run_after are older than older_than,
-- oldest id first, at most max_jobs; read-only (docs/design.md §4, §6 reaper).
BEGIN;
SELECT plan(25);

SELECT jobs.define_type('st_t', queue => 'st_q');
SELECT jobs.define_type('st_o', queue => 'st_other');
SELECT jobs.define_type('st_k', queue => 'st_kids');

CREATE TEMP TABLE j AS
SELECT 'x1' AS name, (jobs.submit('st_t', '{}')).id UNION ALL
SELECT 'x2', (jobs.submit('st_t', '{}')).id UNION ALL
SELECT 'touched', (jobs.submit('st_t', '{}')).id UNION ALL
SELECT 'not_due', (jobs.submit('st_t', '{}', run_after => now() + interval '1 hour')).id UNION ALL
SELECT 'head', (jobs.submit('st_t', '{}', ordering_key => 'st:1')).id UNION ALL
SELECT 'behind', (jobs.submit('st_t', '{}', ordering_key => 'st:1')).id UNION ALL
SELECT 'coordinator', (jobs.fan_out('[{"kind": "st_k"}]', '{"kind": "st_t"}')).id UNION ALL
SELECT 'lost_push', (jobs.submit('st_t', '{}')).id UNION ALL
SELECT 'running', (jobs.submit('st_t', '{}')).id UNION ALL
SELECT 'x3', (jobs.submit('st_t', '{}')).id UNION ALL
SELECT 'elsewhere', (jobs.submit('st_o', '{}')).id;
CREATE FUNCTION pg_temp.id(n text) RETURNS bigint LANGUAGE sql AS $$ SELECT id FROM j WHERE name = n $$;
SELECT jobs.claim(pg_temp.id('head'), 'w');
SELECT jobs.claim(pg_temp.id('running'), 'w');
SELECT jobs.mark_enqueue_failed(ARRAY[pg_temp.id('lost_push')]);
-- Age every job by an hour (created_at and updated_at), then set the interesting updated_at values:
-- x1 was touched 10 s ago, x2 an hour ago (so id order and age order differ), x3 6 s ago,
-- 'touched' was created an hour ago but updated just now.
UPDATE jobs.job SET created_at = now() - interval '1 hour', updated_at = now() - interval '1 hour',
                    run_after = CASE WHEN run_after <= now() THEN now() - interval '1 hour' ELSE run_after END
 WHERE id IN (SELECT id FROM j) OR parent_id = pg_temp.id('coordinator');
UPDATE jobs.job SET updated_at = now() - interval '10 seconds' WHERE id = pg_temp.id('x1');
UPDATE jobs.job SET updated_at = now() - interval '6 seconds' WHERE id = pg_temp.id('x3');
UPDATE jobs.job SET updated_at = now() WHERE id = pg_temp.id('touched');
CREATE TEMP TABLE snap AS SELECT md5(string_agg(j::text, ',' ORDER BY j.id)) AS h, (SELECT count(*) FROM jobs.history) AS e FROM jobs.job AS j;

SELECT is(ARRAY(SELECT job_id FROM jobs.stale_queued('st_q')), ARRAY[pg_temp.id('x1'), pg_temp.id('x2'), pg_temp.id('x3')],
          'stale_queued: default older_than (5 s) -> only the claimable jobs untouched for 5 s, oldest id first');
SELECT is(ARRAY(SELECT job_id FROM jobs.stale_queued('st_q', '30 seconds')), ARRAY[pg_temp.id('x2')],
          'stale_queued: older_than 30 s -> only the job untouched for an hour');
SELECT is(ARRAY(SELECT job_id FROM jobs.stale_queued('st_q', '8 seconds')), ARRAY[pg_temp.id('x1'), pg_temp.id('x2')],
          'stale_queued: older_than 8 s -> x1 (10 s) and x2 (1 h), by id although x2 is older');
SELECT ok(NOT EXISTS (SELECT 1 FROM jobs.stale_queued('st_q') WHERE job_id = pg_temp.id('touched')),
          'stale_queued: age is measured by updated_at: a job created an hour ago but touched now is not stale');
SELECT is(ARRAY(SELECT job_id FROM jobs.stale_queued('st_q', '0 seconds')),
          ARRAY[pg_temp.id('x1'), pg_temp.id('x2'), pg_temp.id('touched'), pg_temp.id('x3')],
          'stale_queued: older_than 0 -> every claimable job of the queue, by id');
SELECT ok(NOT EXISTS (SELECT 1 FROM jobs.stale_queued('st_q', '0 seconds') WHERE job_id = pg_temp.id('not_due')),
          'stale_queued: a job that is not due yet is not claimable -> not listed');
SELECT ok(NOT EXISTS (SELECT 1 FROM jobs.stale_queued('st_q', '0 seconds') WHERE job_id IN (pg_temp.id('head'), pg_temp.id('running'))),
          'stale_queued: processing jobs are not listed');
SELECT ok(NOT EXISTS (SELECT 1 FROM jobs.stale_queued('st_q', '0 seconds') WHERE job_id = pg_temp.id('behind')),
          'stale_queued: a job blocked by an older job of its ordering key is not listed');
SELECT ok(NOT EXISTS (SELECT 1 FROM jobs.stale_queued('st_q', '0 seconds') WHERE job_id = pg_temp.id('coordinator')),
          'stale_queued: a coordinator with pending children is not listed');
SELECT ok(NOT EXISTS (SELECT 1 FROM jobs.stale_queued('st_q', '0 seconds') WHERE job_id = pg_temp.id('lost_push')),
          'stale_queued: an enqueue_failed job is not listed (recover_enqueue_failed owns it)');
SELECT is(ARRAY(SELECT job_id FROM jobs.stale_queued('st_other')), ARRAY[pg_temp.id('elsewhere')],
          'stale_queued: only the named queue is listed');
SELECT is((SELECT (queue, run_after)::text FROM jobs.stale_queued('st_other')),
          (SELECT (queue, run_after)::text FROM jobs.job WHERE id = pg_temp.id('elsewhere')),
          'stale_queued: the signal carries the job''s queue and run_after');
SELECT is_empty($$ SELECT * FROM jobs.stale_queued('no-such-queue', '0 seconds') $$, 'stale_queued: an unknown queue -> zero rows');

-- max_jobs.
SELECT is(ARRAY(SELECT job_id FROM jobs.stale_queued('st_q', '0 seconds', 2)), ARRAY[pg_temp.id('x1'), pg_temp.id('x2')],
          'stale_queued: max_jobs 2 -> the two smallest ids');
SELECT is(ARRAY(SELECT job_id FROM jobs.stale_queued('st_q', '5 seconds', 1)), ARRAY[pg_temp.id('x1')],
          'stale_queued: max_jobs 1 -> the smallest id');

-- Read-only.
SELECT is((SELECT (md5(string_agg(j::text, ',' ORDER BY j.id)), (SELECT count(*) FROM jobs.history))::text FROM jobs.job AS j),
          (SELECT (h, e)::text FROM snap), 'stale_queued: listing changes no job and logs no event');

-- Once the head ends the job behind it becomes stale-listable.
SELECT jobs.complete(pg_temp.id('head'), 'w', 1);
SELECT ok(EXISTS (SELECT 1 FROM jobs.stale_queued('st_q') WHERE job_id = pg_temp.id('behind')),
          'stale_queued: the job behind a finished head is listed (claimable, untouched for an hour)');

-- Bad arguments -> 22023, nothing changed.
CREATE TEMP TABLE snap2 AS SELECT md5(string_agg(j::text, ',' ORDER BY j.id)) AS h FROM jobs.job AS j;
SELECT throws_ok($$ SELECT * FROM jobs.stale_queued(NULL) $$, '22023', NULL, 'stale_queued: NULL queue -> 22023');
SELECT throws_ok($$ SELECT * FROM jobs.stale_queued('st_q', '-1 second') $$, '22023', NULL, 'stale_queued: negative older_than -> 22023');
SELECT throws_ok($$ SELECT * FROM jobs.stale_queued('st_q', NULL) $$, '22023', NULL, 'stale_queued: NULL older_than -> 22023');
SELECT throws_ok($$ SELECT * FROM jobs.stale_queued('st_q', '5 seconds', 0) $$, '22023', NULL, 'stale_queued: max_jobs 0 -> 22023');
SELECT is((SELECT md5(string_agg(j::text, ',' ORDER BY j.id)) FROM jobs.job AS j), (SELECT h FROM snap2),
          'stale_queued: rejected calls changed nothing');

SELECT throws_ok($$ SELECT * FROM jobs.stale_queued('default', '1000000 years') $$, '22023', NULL,
                 'stale_queued: older_than over 100 years -> 22023, not a timestamp overflow');

-- A delayed job written an hour ago and due 2 s ago: its signal is being moved from the
-- delayed set right now, so it is not stale yet; once due for older_than, it is.
SELECT jobs.define_type('st_d', queue => 'st_delayed');
CREATE TEMP TABLE d AS SELECT (jobs.submit('st_d', '{}', run_after => now() + interval '1 hour')).id;
UPDATE jobs.job SET updated_at = now() - interval '1 hour', run_after = now() - interval '2 seconds'
 WHERE id = (SELECT id FROM d);
SELECT is((SELECT count(*) FROM jobs.stale_queued('st_delayed', '5 seconds')), 0::bigint,
          'stale_queued: a delayed job due 2 s ago is not stale at 5 s, however old its last write');
UPDATE jobs.job SET run_after = now() - interval '6 seconds' WHERE id = (SELECT id FROM d);
SELECT is(ARRAY(SELECT job_id FROM jobs.stale_queued('st_delayed', '5 seconds')), ARRAY[(SELECT id FROM d)],
          'stale_queued: once due for longer than older_than, it is');

SELECT * FROM finish();
ROLLBACK;
