-- jobs.event by UTC day: jobs.create_event_partitions makes the partitions ahead (idempotent,
-- a day already in the default partition stays there), jobs.drop_event_partitions drops a day
-- entirely older than the cutoff once no remaining job has an event in it, and jobs.audit
-- accepts the histories retention released, only those (docs/operations.md "History partitions").
BEGIN;
SELECT plan(26);

-- The partition of the UTC day `offset_days` from today.
CREATE FUNCTION pg_temp.part(offset_days integer) RETURNS text LANGUAGE sql AS $$
    SELECT 'jobs.event_' || to_char(date_trunc('day', now(), 'UTC') AT TIME ZONE 'UTC' + make_interval(days => offset_days), 'YYYYMMDD') $$;
CREATE FUNCTION pg_temp.day_partition(offset_days integer) RETURNS void LANGUAGE plpgsql AS $$
DECLARE lo timestamptz := date_trunc('day', now(), 'UTC') + make_interval(hours => 24 * offset_days);
BEGIN
    EXECUTE format('CREATE TABLE %s PARTITION OF jobs.event FOR VALUES FROM (%L) TO (%L)',
                   pg_temp.part(offset_days), lo, lo + interval '24 hours');
END $$;
CREATE FUNCTION pg_temp.days_ago(job_id bigint, d integer) RETURNS void LANGUAGE sql AS $$
    UPDATE jobs.event AS e SET at = e.at - make_interval(days => d) WHERE e.job_id = days_ago.job_id;
    UPDATE jobs.job SET created_at = created_at - make_interval(days => d), updated_at = updated_at - make_interval(days => d),
                        finished_at = finished_at - make_interval(days => d), run_after = run_after - make_interval(days => d)
     WHERE id = days_ago.job_id;
$$;
-- Done at the second attempt: the first attempt's claim and retry are rows of jobs.event
-- (a lease its claimant completes is recorded by the job row alone).
CREATE FUNCTION pg_temp.done(kind text) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE job bigint := (jobs.submit(kind)).id; v bigint;
BEGIN
    SELECT l.lease_version INTO STRICT v FROM jobs.claim(job, 'w') AS l;
    PERFORM jobs.fail(job, 'w', v, 'again', true);
    UPDATE jobs.job AS r SET run_after = now() WHERE r.id = job;
    SELECT l.lease_version INTO STRICT v FROM jobs.claim(job, 'w') AS l;
    PERFORM jobs.complete(job, 'w', v, '{}');
    RETURN job;
END $$;
-- Claimed, then failed with a retry: queued again, with transitions in jobs.event (a job
-- only submitted has none there: its submission is its row).
CREATE FUNCTION pg_temp.retried(kind text) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE job bigint := (jobs.submit(kind)).id; v bigint;
BEGIN
    SELECT l.lease_version INTO STRICT v FROM jobs.claim(job, 'w') AS l;
    PERFORM jobs.fail(job, 'w', v, 'again', true);
    RETURN job;
END $$;
CREATE FUNCTION pg_temp.partition_of(job bigint) RETURNS text[] LANGUAGE sql AS $$
    SELECT array_agg(DISTINCT tableoid::regclass::text ORDER BY tableoid::regclass::text) FROM jobs.event WHERE job_id = job $$;
CREATE FUNCTION pg_temp.violations() RETURNS bigint LANGUAGE sql AS $$ SELECT sum(violations)::bigint FROM jobs.audit() $$;

-- Deployed with today's partition and three days ahead, plus the default partition.
SELECT ok(to_regclass(pg_temp.part(0)) IS NOT NULL AND to_regclass(pg_temp.part(3)) IS NOT NULL,
          'partitions: the deploy created today''s partition and three days ahead');
SELECT ok(to_regclass('jobs.event_default') IS NOT NULL, 'partitions: the default partition exists');
SELECT is(jobs.create_event_partitions(), 0, 'partitions: a second call creates nothing (idempotent)');
SELECT is(jobs.create_event_partitions('5 days'), 2, 'partitions: ahead 5 days -> days 4 and 5 created');
SELECT is((SELECT count(*) FROM pg_inherits WHERE inhparent = 'jobs.event'::regclass), 7::bigint,
          'partitions: today + 5 days ahead + the default partition');
SELECT throws_ok($$ SELECT jobs.create_event_partitions('-1 day') $$, '22023', NULL, 'partitions: negative ahead -> 22023');
SELECT throws_ok($$ SELECT jobs.create_event_partitions(NULL) $$, '22023', NULL, 'partitions: NULL ahead -> 22023');
SELECT throws_ok($$ SELECT jobs.create_event_partitions('91 days') $$, '22023', NULL, 'partitions: ahead over 90 days -> 22023');
SELECT is(current_setting('lock_timeout'), '0', 'partitions: the caller''s lock_timeout is as it was');

-- A day whose events reached the default partition first keeps them there: no overlap error.
SELECT jobs.define_type('ep_t');
INSERT INTO jobs.event (job_id, at, to_status, lease_version, reason)
VALUES (-1, date_trunc('day', now(), 'UTC') + interval '7 days 1 hour', 'queued', 0, 'released');
SET LOCAL client_min_messages = error;  -- the warning about day 7 is expected
SELECT is(jobs.create_event_partitions('8 days'), 2, 'partitions: ahead 8 days -> days 6 and 8, not day 7');
RESET client_min_messages;
SELECT ok(to_regclass(pg_temp.part(7)) IS NULL, 'partitions: ... day 7 stays in the default partition');
DELETE FROM jobs.event WHERE job_id = -1;

-- Transitions land in today's partition.
SELECT jobs.define_type('ep_t');
CREATE TEMP TABLE j (name text, id bigint);
INSERT INTO j VALUES ('today', pg_temp.done('ep_t'));
SELECT is(pg_temp.partition_of((SELECT id FROM j WHERE name = 'today')), ARRAY[pg_temp.part(0)],
          'partitions: a job''s transitions go to today''s partition');

-- History 10 and 9 days old: A entirely on day -10, B on days -10 and -9, K (kept, queued
-- again after a retry) on day -9; M (kept, only submitted today) has an id between A's and
-- B's but no event on day -10.
SELECT pg_temp.day_partition(-10), pg_temp.day_partition(-9);
INSERT INTO j VALUES ('a', pg_temp.done('ep_t'));
INSERT INTO j VALUES ('m', (jobs.submit('ep_t')).id);
INSERT INTO j VALUES ('b', pg_temp.done('ep_t'));
INSERT INTO j VALUES ('k', pg_temp.retried('ep_t'));
SELECT pg_temp.days_ago(id, 10) FROM j WHERE name IN ('a', 'b');
-- B's completion a day later than the rest of it
UPDATE jobs.event SET at = at + interval '1 day' WHERE job_id = (SELECT id FROM j WHERE name = 'b') AND reason = 'retried';
UPDATE jobs.job SET finished_at = finished_at + interval '1 day' WHERE id = (SELECT id FROM j WHERE name = 'b');
SELECT pg_temp.days_ago(id, 9) FROM j WHERE name = 'k';
SELECT is(pg_temp.partition_of((SELECT id FROM j WHERE name = 'b')), ARRAY[pg_temp.part(-10), pg_temp.part(-9)],
          'partitions: (fixture) B''s history spans days -10 and -9');
SELECT is(pg_temp.violations(), 0::bigint, 'partitions: (fixture) the audit is clean');
CREATE TEMP TABLE k_history AS SELECT * FROM jobs.events((SELECT id FROM j WHERE name = 'k'));

SELECT throws_ok($$ SELECT jobs.drop_event_partitions('-1 day') $$, '22023', NULL, 'drop: negative older_than -> 22023');
SELECT throws_ok($$ SELECT jobs.drop_event_partitions(NULL) $$, '22023', NULL, 'drop: NULL older_than -> 22023');
SELECT is(jobs.drop_event_partitions('7 days'), 0, 'drop: nothing while the jobs of those days are all kept');

SELECT is(jobs.prune('7 days'), 2::bigint, 'drop: (fixture) prune deletes A and B, keeps the queued K and M');
SELECT is(pg_temp.violations(), 0::bigint,
          'drop: the audit accepts the histories of the pruned jobs, older than the horizon, while they wait');
SELECT is(jobs.drop_event_partitions('7 days'), 1, 'drop: one partition dropped');
SELECT ok(to_regclass(pg_temp.part(-10)) IS NULL AND to_regclass(pg_temp.part(-9)) IS NOT NULL,
          'drop: ... day -10 (only pruned jobs; M, in its id range, has no event there), not day -9 (K has its retry there)');
SELECT results_eq($$ SELECT * FROM jobs.events((SELECT id FROM j WHERE name = 'k')) $$, $$ SELECT * FROM k_history $$,
                  'drop: a kept job keeps its whole history');
SELECT is(pg_temp.violations(), 0::bigint, 'drop: the audit is clean after the drop (B''s remaining event is released)');
SELECT ok(to_regclass('jobs.event_default') IS NOT NULL AND to_regclass(pg_temp.part(0)) IS NOT NULL,
          'drop: the default partition and today''s stay');

-- Once K is gone too, its day goes; a repeat finds nothing more.
DELETE FROM jobs.job WHERE id = (SELECT id FROM j WHERE name = 'k');
SELECT is(jobs.drop_event_partitions('7 days') + jobs.drop_event_partitions('7 days'), 1,
          'drop: day -9 dropped once its last job is gone, then nothing');

-- The horizon hides only what retention released: a job deleted behind its back, with recent history, is found.
DELETE FROM jobs.job WHERE id = (SELECT id FROM j WHERE name = 'today');
SELECT is((SELECT example_job_ids FROM jobs.audit() WHERE check_name = 'history_of_every_job'),
          ARRAY[(SELECT id FROM j WHERE name = 'today')], 'audit: a history after the horizon without its job is still found');

SELECT * FROM finish();
ROLLBACK;
