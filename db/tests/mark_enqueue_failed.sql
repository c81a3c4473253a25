-- jobs.mark_enqueue_failed: queued -> enqueue_failed for the ids still queued; the rest
-- (claimed, finished, unknown) are skipped; returns the count (docs/design.md §2, §4).
BEGIN;
SELECT plan(20);

SELECT jobs.define_type('mef_t', queue => 'mef_q');
CREATE TEMP TABLE j AS
SELECT 'q1' AS name, (jobs.submit('mef_t', '{"n": 1}')).id UNION ALL
SELECT 'q2', (jobs.submit('mef_t', '{"n": 2}')).id UNION ALL
SELECT 'later', (jobs.submit('mef_t', '{"n": 3}', run_after => now() + interval '1 hour')).id UNION ALL
SELECT 'running', (jobs.submit('mef_t', '{"n": 4}')).id UNION ALL
SELECT 'finished', (jobs.submit('mef_t', '{"n": 5}')).id;
CREATE FUNCTION pg_temp.id(n text) RETURNS bigint LANGUAGE sql AS $$ SELECT id FROM j WHERE name = n $$;
SELECT jobs.claim(pg_temp.id('running'), 'w');
SELECT jobs.complete(pg_temp.id('finished'), 'w', (SELECT lease_version FROM jobs.claim(pg_temp.id('finished'), 'w')));
-- Age the rows so the update of updated_at is visible.
UPDATE jobs.job SET updated_at = now() - interval '1 minute' WHERE id IN (SELECT id FROM j);
CREATE TEMP TABLE before_rows AS SELECT * FROM jobs.job WHERE id IN (SELECT id FROM j);
CREATE TEMP TABLE before_events AS SELECT count(*) AS n FROM jobs.history;

-- mark a mixed list.
SELECT is(jobs.mark_enqueue_failed(ARRAY[pg_temp.id('q1'), pg_temp.id('running'), pg_temp.id('finished'),
                                         -1, pg_temp.id('q1'), pg_temp.id('later')]),
          2, 'mark_enqueue_failed: of queued, queued-not-due, processing, done, unknown and a duplicate id -> 2 marked');
SELECT is((SELECT status FROM jobs.job WHERE id = pg_temp.id('q1')), 'enqueue_failed'::jobs.status,
          'mark_enqueue_failed: a queued job becomes enqueue_failed');
SELECT is((SELECT status FROM jobs.job WHERE id = pg_temp.id('later')), 'enqueue_failed'::jobs.status,
          'mark_enqueue_failed: a queued job that is not due yet is marked too (it is still queued)');
SELECT is((SELECT (lease_version, retry_count, run_after, updated_at)::text FROM jobs.job WHERE id = pg_temp.id('q1')),
          (SELECT (lease_version, retry_count, run_after, now())::text FROM before_rows WHERE id = pg_temp.id('q1')),
          'mark_enqueue_failed: lease_version, retry_count and run_after are kept, updated_at = now()');
SELECT results_eq($$ SELECT from_status, to_status, lease_version, worker, reason, at FROM jobs.history
                      WHERE job_id = pg_temp.id('q1') ORDER BY id DESC LIMIT 1 $$,
                  $$ VALUES ('queued'::jobs.status, 'enqueue_failed'::jobs.status, 0::bigint, NULL::text, 'enqueue_failed', now()) $$,
                  'mark_enqueue_failed: logs queued -> enqueue_failed, reason enqueue_failed, at now()');
SELECT is((SELECT count(*) - (SELECT n FROM before_events) FROM jobs.history), 2::bigint,
          'mark_enqueue_failed: one event per marked job, none for skipped ids or the duplicate');
SELECT is((SELECT j::text FROM jobs.job AS j WHERE j.id = pg_temp.id('running')),
          (SELECT b::text FROM before_rows AS b WHERE b.id = pg_temp.id('running')),
          'mark_enqueue_failed: a claimed (processing) job is skipped, row unchanged');
SELECT is((SELECT j::text FROM jobs.job AS j WHERE j.id = pg_temp.id('finished')),
          (SELECT b::text FROM before_rows AS b WHERE b.id = pg_temp.id('finished')),
          'mark_enqueue_failed: a done job is skipped, row unchanged');
SELECT is((SELECT j::text FROM jobs.job AS j WHERE j.id = pg_temp.id('q2')),
          (SELECT b::text FROM before_rows AS b WHERE b.id = pg_temp.id('q2')),
          'mark_enqueue_failed: a job not in the list is untouched');

-- an enqueue_failed job is not claimable.
SELECT is_empty($$ SELECT * FROM jobs.claim(pg_temp.id('q1'), 'w2') $$, 'mark_enqueue_failed: claim of an enqueue_failed job -> zero rows');
SELECT is_empty($$ SELECT * FROM jobs.claim_many(ARRAY[pg_temp.id('q1')], 'w2') $$, 'mark_enqueue_failed: claim_many of it -> zero rows');
SELECT is(ARRAY(SELECT job_id FROM jobs.claim_next('w2', ARRAY['mef_q'], 10)), ARRAY[pg_temp.id('q2')],
          'mark_enqueue_failed: claim_next takes the queued job and skips the enqueue_failed one');
SELECT is((SELECT status FROM jobs.job WHERE id = pg_temp.id('q1')), 'enqueue_failed'::jobs.status,
          'mark_enqueue_failed: the enqueue_failed job stays enqueue_failed after the claim attempts');

-- repeats and empty input.
CREATE TEMP TABLE mid_events AS SELECT count(*) AS n FROM jobs.history;
SELECT is(jobs.mark_enqueue_failed(ARRAY[pg_temp.id('q1'), pg_temp.id('later')]), 0,
          'mark_enqueue_failed: marking enqueue_failed jobs again -> 0');
SELECT is(jobs.mark_enqueue_failed('{}'::bigint[]), 0, 'mark_enqueue_failed: an empty array -> 0');
SELECT is((SELECT count(*) FROM jobs.history), (SELECT n FROM mid_events), 'mark_enqueue_failed: ... and logs nothing');

-- NULL -> 22023, nothing changed.
CREATE TEMP TABLE snap AS SELECT md5(string_agg(j::text, ',' ORDER BY j.id)) AS h, (SELECT count(*) FROM jobs.history) AS e FROM jobs.job AS j;
SELECT throws_ok($$ SELECT jobs.mark_enqueue_failed(NULL) $$, '22023', NULL, 'mark_enqueue_failed: NULL job_ids -> 22023');
SELECT throws_like($$ SELECT jobs.mark_enqueue_failed(NULL) $$, '%mark_enqueue_failed%', 'mark_enqueue_failed: the error names the function');
SELECT is((SELECT (md5(string_agg(j::text, ',' ORDER BY j.id)), (SELECT count(*) FROM jobs.history))::text FROM jobs.job AS j),
          (SELECT (h, e)::text FROM snap), 'mark_enqueue_failed: the rejected call changed no job and logged no event');
SELECT is((SELECT status FROM jobs.job WHERE id = pg_temp.id('q2')), 'processing'::jobs.status,
          'mark_enqueue_failed: (fixture) q2 was claimed by claim_next');

SELECT * FROM finish();
ROLLBACK;
