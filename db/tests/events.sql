-- jobs.events: a job's transition history, oldest first, with from/to status, lease_version after
-- the transition, worker, reason and error; zero rows for an unknown id (docs/design.md §3, decisions).
BEGIN;
SELECT plan(12);

SELECT jobs.define_type('ev_t', max_retries => 3);
CREATE TEMP TABLE j AS SELECT * FROM jobs.submit('ev_t', '{"x": 1}');
CREATE TEMP TABLE other AS SELECT * FROM jobs.submit('ev_t', '{"x": 2}');
CREATE FUNCTION pg_temp.jid() RETURNS bigint LANGUAGE sql AS $$ SELECT id FROM j $$;

SELECT results_eq($$ SELECT job_id, from_status, to_status, lease_version, worker, reason, error, at FROM jobs.events(pg_temp.jid()) $$,
                  $$ VALUES (pg_temp.jid(), NULL::jobs.status, 'queued'::jobs.status, 0::bigint, NULL::text, 'submitted', NULL::text, now()) $$,
                  'events: a new job has one event: (new) -> queued, submitted, lease_version 0, at now()');

-- A long life: lost push, recovery, a retried attempt, a cancelled attempt, a replay, success.
SELECT jobs.mark_enqueue_failed(ARRAY[pg_temp.jid()]);
SELECT * FROM jobs.recover_enqueue_failed();
SELECT jobs.fail(pg_temp.jid(), 'w1', (SELECT lease_version FROM jobs.claim(pg_temp.jid(), 'w1')), 'e1');
UPDATE jobs.job SET run_after = now() WHERE id = pg_temp.jid();          -- the backoff has passed
SELECT * FROM jobs.claim(pg_temp.jid(), 'w2');
SELECT jobs.cancel(pg_temp.jid(), 'stop please');
SELECT jobs.fail(pg_temp.jid(), 'w2', 3, 'e2');
SELECT jobs.replay(pg_temp.jid());
SELECT jobs.complete(pg_temp.jid(), 'w3', (SELECT lease_version FROM jobs.claim(pg_temp.jid(), 'w3')), '{"r": 1}');
SELECT * FROM jobs.claim(pg_temp.jid(), 'w9');  -- a duplicate signal: no event

SELECT results_eq($$ SELECT reason, from_status::text, to_status::text, lease_version, worker FROM jobs.events(pg_temp.jid()) $$,
                  $$ VALUES ('submitted', NULL, 'queued', 0::bigint, NULL::text),
                            ('enqueue_failed', 'queued', 'enqueue_failed', 0, NULL),
                            ('recovered', 'enqueue_failed', 'queued', 0, NULL),
                            ('claimed', 'queued', 'processing', 1, 'w1'),
                            ('retried', 'processing', 'queued', 2, 'w1'),
                            ('claimed', 'queued', 'processing', 3, 'w2'),
                            ('cancel_requested', 'processing', 'processing', 3, 'w2'),
                            ('cancelled', 'processing', 'failed', 3, 'w2'),
                            ('replayed', 'failed', 'queued', 4, NULL),
                            ('claimed', 'queued', 'processing', 5, 'w3'),
                            ('completed', 'processing', 'done', 5, 'w3') $$,
                  'events: the whole history, oldest first: reason, from, to, lease_version after the transition, worker');
SELECT is(ARRAY(SELECT id FROM jobs.events(pg_temp.jid())), ARRAY(SELECT id FROM jobs.history WHERE job_id = pg_temp.jid() ORDER BY id),
          'events: ordered by event id');
SELECT is(ARRAY(SELECT error FROM jobs.events(pg_temp.jid()) WHERE reason IN ('retried', 'cancel_requested', 'cancelled')),
          ARRAY['e1', 'stop please', 'e2'],
          'events: failure chronology: each failed attempt''s error and the cancel reason are kept');
SELECT is((SELECT count(*) FROM jobs.events(pg_temp.jid()) WHERE at <> now()), 0::bigint, 'events: every event is stamped with now()');
SELECT is((SELECT count(*) FROM jobs.events(pg_temp.jid()) WHERE job_id <> pg_temp.jid()), 0::bigint,
          'events: only the asked job''s events');
SELECT is((SELECT error FROM jobs.job WHERE id = pg_temp.jid()), 'e2',
          'events: the job keeps the latest error while the events keep them all');
SELECT results_eq($$ SELECT reason FROM jobs.events((SELECT id FROM other)) $$, $$ VALUES ('submitted') $$,
                  'events: another job''s history is its own');

-- Unknown ids and read-only.
CREATE TEMP TABLE snap AS SELECT md5(string_agg(r::text, ',' ORDER BY r.id)) AS h, (SELECT count(*) FROM jobs.history) AS e FROM jobs.job AS r;
SELECT is_empty($$ SELECT * FROM jobs.events(-1) $$, 'events: unknown id -> zero rows, no error');
SELECT is_empty($$ SELECT * FROM jobs.events(NULL) $$, 'events: NULL id -> zero rows');
SELECT is((SELECT (md5(string_agg(r::text, ',' ORDER BY r.id)), (SELECT count(*) FROM jobs.history))::text FROM jobs.job AS r),
          (SELECT (h, e)::text FROM snap), 'events: reading changes nothing');

-- Pruned with the job.
UPDATE jobs.job SET finished_at = now() - interval '30 days' WHERE id = pg_temp.jid();
SELECT jobs.prune();
SELECT is_empty($$ SELECT * FROM jobs.events(pg_temp.jid()) $$, 'events: a pruned job has no events left');

SELECT * FROM finish();
ROLLBACK;
