-- jobs.prune: deletes only done/failed jobs whose finished_at is older than the cutoff, with
-- their events in jobs.event_default (those in day partitions go with the partition,
-- db/tests/event_partitions.sql); a child is kept while its coordinator is kept; returns the
-- count (docs/design.md §4, decisions "Ordering keys and fan-in").
BEGIN;
SELECT plan(32);

SELECT jobs.define_type('pr_t');
-- Done at the second attempt: the first attempt's claim and retry are rows of jobs.event
-- (a lease its claimant completes is recorded by the job row alone).
CREATE FUNCTION pg_temp.run_done(job bigint) RETURNS jobs.outcome LANGUAGE plpgsql AS $$
DECLARE v bigint;
BEGIN
    SELECT l.lease_version INTO STRICT v FROM jobs.claim(job, 'w') AS l;
    PERFORM jobs.fail(job, 'w', v, 'again', true);
    UPDATE jobs.job AS r SET run_after = now() WHERE r.id = job;
    SELECT l.lease_version INTO STRICT v FROM jobs.claim(job, 'w') AS l;
    RETURN jobs.complete(job, 'w', v, '{"ok": true}');
END $$;
CREATE TEMP TABLE j (name text, id bigint);
CREATE FUNCTION pg_temp.id(n text) RETURNS bigint LANGUAGE sql AS $$ SELECT id FROM j WHERE name = n $$;
CREATE FUNCTION pg_temp.age(n text, a interval) RETURNS void LANGUAGE sql AS $$
    UPDATE jobs.job SET finished_at = now() - a WHERE id = pg_temp.id(n);
$$;

INSERT INTO j SELECT 'done_old', (jobs.submit('pr_t')).id;
INSERT INTO j SELECT 'failed_old', (jobs.submit('pr_t')).id;
INSERT INTO j SELECT 'done_new', (jobs.submit('pr_t')).id;
INSERT INTO j SELECT 'done_at_cutoff', (jobs.submit('pr_t')).id;
INSERT INTO j SELECT 'queued_old', (jobs.submit('pr_t')).id;
INSERT INTO j SELECT 'running_old', (jobs.submit('pr_t')).id;
INSERT INTO j SELECT 'lost_old', (jobs.submit('pr_t')).id;
SELECT pg_temp.run_done(pg_temp.id(n)) FROM unnest(ARRAY['done_old', 'done_new', 'done_at_cutoff']) AS n;
SELECT jobs.cancel(pg_temp.id('failed_old'));
SELECT * FROM jobs.claim(pg_temp.id('running_old'), 'w');
SELECT jobs.mark_enqueue_failed(ARRAY[pg_temp.id('lost_old')]);
-- Fan-out A: coordinator still waiting (one child pending), the other child finished long ago.
INSERT INTO j SELECT 'a', (jobs.fan_out('[{"kind": "pr_t"}, {"kind": "pr_t"}]', '{"kind": "pr_t"}')).id;
INSERT INTO j SELECT 'a_done', min(id) FROM jobs.job WHERE parent_id = pg_temp.id('a');
-- Fan-out B: children finished long ago, coordinator recently.
INSERT INTO j SELECT 'b', (jobs.fan_out('[{"kind": "pr_t"}, {"kind": "pr_t"}]', '{"kind": "pr_t"}')).id;
INSERT INTO j SELECT 'b_kid' || row_number() OVER (ORDER BY id), id FROM jobs.job WHERE parent_id = pg_temp.id('b');
-- Fan-out C: everything finished long ago.
INSERT INTO j SELECT 'c', (jobs.fan_out('[{"kind": "pr_t"}, {"kind": "pr_t"}]', '{"kind": "pr_t"}')).id;
INSERT INTO j SELECT 'c_kid' || row_number() OVER (ORDER BY id), id FROM jobs.job WHERE parent_id = pg_temp.id('c');
SELECT pg_temp.run_done(pg_temp.id(n)) FROM unnest(ARRAY['a_done', 'b_kid1', 'b_kid2', 'c_kid1', 'c_kid2', 'b', 'c']) AS n;

-- Ages: everything happened 30 days ago, then finish times are set per case.
UPDATE jobs.job SET created_at = now() - interval '30 days', updated_at = now() - interval '30 days',
                    run_after = now() - interval '30 days'
 WHERE id IN (SELECT id FROM j);
UPDATE jobs.job SET claimed_at = now() - interval '30 days' WHERE id = pg_temp.id('running_old');
SELECT pg_temp.age('done_old', '8 days'), pg_temp.age('failed_old', '8 days'), pg_temp.age('done_new', '1 day'),
       pg_temp.age('done_at_cutoff', '7 days'), pg_temp.age('a_done', '8 days'),
       pg_temp.age('b_kid1', '9 days'), pg_temp.age('b_kid2', '9 days'), pg_temp.age('b', '1 day'),
       pg_temp.age('c_kid1', '9 days'), pg_temp.age('c_kid2', '9 days'), pg_temp.age('c', '8 days');
SELECT is((SELECT count(*) FROM jobs.job WHERE status IN ('done', 'failed') AND id IN (SELECT id FROM j)), 11::bigint,
          'prune: (fixture) eleven finished jobs');

-- Two histories dated before any day partition: they are in the default partition.
UPDATE jobs.event SET at = at - interval '30 days' WHERE job_id IN (pg_temp.id('done_old'), pg_temp.id('c_kid1'));
SELECT is((SELECT count(DISTINCT job_id) FROM jobs.event_default), 2::bigint, 'prune: (fixture) two histories in jobs.event_default');
CREATE TEMP TABLE before_events AS SELECT e.job_id, count(*) AS n FROM jobs.history AS e GROUP BY e.job_id;
-- The rows of jobs.event, apart from the histories: a pruned job's submission goes with its row.
CREATE TEMP TABLE before_rows AS SELECT e.job_id, count(*) AS n FROM jobs.event AS e GROUP BY e.job_id;
CREATE TEMP TABLE snap AS SELECT md5(string_agg(j::text, ',' ORDER BY j.id)) AS h, (SELECT count(*) FROM jobs.event) AS e FROM jobs.job AS j;

-- Bad arguments -> 22023, nothing deleted.
SELECT throws_ok($$ SELECT jobs.prune('-1 day') $$, '22023', NULL, 'prune: negative older_than -> 22023');
SELECT throws_ok($$ SELECT jobs.prune(NULL) $$, '22023', NULL, 'prune: NULL older_than -> 22023');
SELECT is((SELECT (md5(string_agg(j::text, ',' ORDER BY j.id)), (SELECT count(*) FROM jobs.event))::text FROM jobs.job AS j),
          (SELECT (h, e)::text FROM snap), 'prune: rejected calls deleted nothing');

-- The default cutoff (7 days).
SELECT is(jobs.prune(), 5::bigint, 'prune: default 7 days -> 5 deleted (done_old, failed_old, coordinator c and its two children)');
SELECT set_eq($$ SELECT name FROM j WHERE NOT EXISTS (SELECT 1 FROM jobs.job AS x WHERE x.id = j.id) $$,
              ARRAY['done_old', 'failed_old', 'c', 'c_kid1', 'c_kid2'],
              'prune: exactly those jobs are gone');
SELECT is((SELECT count(*) FROM jobs.event_default), 0::bigint,
          'prune: their events in jobs.event_default are gone with them');
SELECT is((SELECT count(*) FROM jobs.event), (SELECT e FROM snap) - (SELECT sum(n) FROM before_rows
              WHERE job_id IN (pg_temp.id('done_old'), pg_temp.id('c_kid1')))::bigint,
          'prune: no other event was deleted: those in day partitions wait for jobs.drop_event_partitions');
SELECT cmp_ok((SELECT released_before FROM jobs.event_retention), '>=', now() - interval '7 days',
              'prune: the horizon of released histories moved to the cutoff');
SELECT is((SELECT status FROM jobs.job WHERE id = pg_temp.id('done_new')), 'done'::jobs.status,
          'prune: a job finished 1 day ago is kept');
SELECT is((SELECT status FROM jobs.job WHERE id = pg_temp.id('done_at_cutoff')), 'done'::jobs.status,
          'prune: a job finished exactly 7 days ago is not older than the cutoff: kept');
SELECT is((SELECT count(*) FROM jobs.job WHERE id IN (pg_temp.id('queued_old'), pg_temp.id('running_old'), pg_temp.id('lost_old'))),
          3::bigint, 'prune: queued, processing and enqueue_failed jobs are kept however old');
SELECT is((SELECT status FROM jobs.job WHERE id = pg_temp.id('a_done')), 'done'::jobs.status,
          'prune: an old finished child of a waiting coordinator is kept');
SELECT is((SELECT count(*) FROM jobs.children(pg_temp.id('a'))), 2::bigint, 'prune: ... so children() of that coordinator is complete');
SELECT is((SELECT count(*) FROM jobs.children(pg_temp.id('b'))), 2::bigint,
          'prune: old children of a recently finished coordinator are kept: children() complete');
SELECT is((SELECT count(*) FROM jobs.events(pg_temp.id('b_kid1'))), (SELECT n FROM before_events WHERE job_id = pg_temp.id('b_kid1')),
          'prune: a kept child keeps its events');

-- Repeats and a shorter cutoff.
SELECT is(jobs.prune('7 days'), 0::bigint, 'prune: a second run with the same cutoff deletes nothing');
SELECT is(jobs.prune('1 hour'), 5::bigint,
          'prune: cutoff 1 hour -> done_new, done_at_cutoff, coordinator b and both its children');
SELECT is((SELECT count(*) FROM jobs.job WHERE id IN (SELECT id FROM j)), 5::bigint,
          'prune: left are the three unfinished jobs, coordinator a and its old finished child');
SELECT is((SELECT count(*) FROM jobs.job WHERE parent_id = pg_temp.id('a')), 2::bigint,
          'prune: coordinator a still has both children');
SELECT is((SELECT status FROM jobs.job WHERE id = pg_temp.id('a_done')), 'done'::jobs.status,
          'prune: the child of the still-waiting coordinator survives any cutoff');
SELECT is((SELECT parent_id FROM jobs.job WHERE id = pg_temp.id('a_done')), pg_temp.id('a'), 'prune: ... still pointing at it');

-- A coordinator that has not run keeps even its old children; once it finished and is old, they go with it.
SELECT pg_temp.run_done(id) FROM jobs.job WHERE parent_id = pg_temp.id('a') AND status = 'queued';
SELECT is((SELECT status FROM jobs.job WHERE id = pg_temp.id('a')), 'queued'::jobs.status,
          'prune: (fixture) coordinator a is queued, both children done');
SELECT is(jobs.prune('0 seconds'), 0::bigint,
          'prune: cutoff 0 -> nothing: the old child''s coordinator is still kept, the other child finished now (not older than now)');
SELECT pg_temp.run_done(pg_temp.id('a'));
SELECT pg_temp.age('a', '1 day');
SELECT is(jobs.prune('1 hour'), 2::bigint, 'prune: coordinator a finished a day ago -> it and its 8-day-old child are deleted');
SELECT is((SELECT (status, parent_id)::text FROM jobs.job WHERE parent_id IS NULL AND id IN (SELECT id FROM jobs.job WHERE kind = 'pr_t' AND status = 'done')),
          '(done,)', 'prune: the child finished just now is kept, detached from its deleted coordinator');

SELECT throws_ok($$ SELECT jobs.prune('1000000 years') $$, '22023', NULL,
                 'prune: older_than over 100 years -> 22023, not a timestamp overflow');
SELECT throws_ok($$ SELECT jobs.prune('1 day', 0) $$, '22023', NULL, 'prune: max_jobs 0 -> 22023');

-- Bounded calls: at most max_jobs each, oldest first, until a call returns fewer.
INSERT INTO j SELECT 'bulk' || g, (jobs.submit('pr_t')).id FROM generate_series(1, 5) AS g;
SELECT pg_temp.run_done(pg_temp.id('bulk' || g)) FROM generate_series(1, 5) AS g;
SELECT pg_temp.age('bulk' || g, make_interval(days => 10 + g)) FROM generate_series(1, 5) AS g;
SELECT is(jobs.prune('1 day', 2), 2::bigint, 'prune: max_jobs 2 deletes two');
SELECT is((SELECT count(*) FROM jobs.job WHERE id IN (pg_temp.id('bulk5'), pg_temp.id('bulk4'))), 0::bigint,
          'prune: ... the two oldest');
SELECT is(jobs.prune('1 day', 2) + jobs.prune('1 day', 2), 3::bigint, 'prune: the next calls take the rest (2 + 1)');

SELECT * FROM finish();
ROLLBACK;
