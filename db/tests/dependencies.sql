-- Dependencies between jobs (docs/sql-api.md "Dependencies"): depends_on by id or by an
-- earlier spec's position, several levels deep; the policies for a parent that fails (fail,
-- run, wait); the events of every release; jobs.dependencies and jobs.dependents; bad input;
-- and, in two dblink sessions on committed rows, a parent finishing while its dependent is
-- submitted.
BEGIN;
SELECT plan(50);
CREATE EXTENSION IF NOT EXISTS dblink;
SELECT jobs.define_type('dg.k', max_retries => 0);

CREATE FUNCTION pg_temp.run(job bigint, ok boolean DEFAULT true) RETURNS bigint[] LANGUAGE plpgsql AS $$
DECLARE v bigint;
BEGIN
    SELECT l.lease_version INTO STRICT v FROM jobs.claim(job, 'w') AS l;
    IF ok THEN
        RETURN (jobs.complete(job, 'w', v)).wake;
    END IF;
    RETURN (jobs.fail(job, 'w', v, 'boom', false)).wake;
END $$;
CREATE FUNCTION pg_temp.claimable(job bigint) RETURNS boolean LANGUAGE sql AS $$
    SELECT EXISTS (SELECT 1 FROM jobs.claimable AS c WHERE c.id = job)
$$;
CREATE FUNCTION pg_temp.spec(body text) RETURNS SETOF bigint LANGUAGE sql AS $$
    SELECT id FROM jobs.submit_many(body::jsonb)
$$;
CREATE FUNCTION pg_temp.reasons(job bigint) RETURNS text[] LANGUAGE sql AS $$
    SELECT array_agg(reason ORDER BY id) FROM jobs.history WHERE job_id = job
$$;

-- 1. Three levels: a -> b -> c, and d after a and b (fan-in through edges).
SELECT id AS a FROM jobs.submit('dg.k') \gset
SELECT array_agg(x ORDER BY x) AS ids FROM pg_temp.spec(format(
    '[{"kind": "dg.k", "depends_on": [%s]}, {"kind": "dg.k", "depends_on": [{"spec": 0}]},
      {"kind": "dg.k", "depends_on": [%1$s, {"spec": 0}, %1$s]}]', :a)) AS x \gset
SELECT (:'ids'::bigint[])[1] AS b, (:'ids'::bigint[])[2] AS c, (:'ids'::bigint[])[3] AS d \gset
SELECT is((SELECT array_agg(pending_children ORDER BY id) FROM jobs.job WHERE id IN (:b, :c, :d)), '{1,1,2}'::integer[],
          'each dependent waits for its unfinished dependencies (a repeated id counts once)');
SELECT ok(NOT pg_temp.claimable(:b) AND NOT pg_temp.claimable(:c) AND NOT pg_temp.claimable(:d),
          'no dependent is claimable before its dependencies are done');
SELECT is((SELECT count(*) FROM jobs.claim(:b, 'w')), 0::bigint, 'a claim by id refuses a waiting dependent');
SELECT is(pg_temp.run(:a), ARRAY[:b]::bigint[], 'the parent''s completion wakes the dependent it released');
SELECT ok(pg_temp.claimable(:b), 'released: b is claimable');
SELECT ok(NOT pg_temp.claimable(:c), 'a second level still waits');
SELECT is((SELECT pending_children FROM jobs.job WHERE id = :d), 1, 'd, after a and b, waits for b alone now');
SELECT is(pg_temp.reasons(:b), '{submitted,released}', 'the release is an event of its own (queued -> queued, released)');
SELECT is(pg_temp.run(:b), ARRAY[:c, :d]::bigint[], 'b''s completion releases both c and d');
SELECT is(pg_temp.reasons(:d), '{submitted,released}', 'd is released once, by its last dependency');
SELECT is((SELECT array_agg(depends_on ORDER BY depends_on) FROM jobs.dependencies(:d)), ARRAY[:a, :b]::bigint[],
          'jobs.dependencies lists a job''s parents');
SELECT ok((SELECT bool_and(released_at IS NOT NULL AND on_failure = 'fail') FROM jobs.dependencies(:d)),
          'jobs.dependencies: each edge released, under the default policy fail');
SELECT is((SELECT array_agg(job_id ORDER BY job_id) FROM jobs.dependents(:a)), ARRAY[:b, :d]::bigint[],
          'jobs.dependents lists a job''s children in the graph');
SELECT is((SELECT count(*) FROM jobs.dependents(:c)), 0::bigint, 'jobs.dependents: none for a leaf');

-- 2. A parent that fails, per policy.
SELECT id AS p FROM jobs.submit('dg.k') \gset
SELECT array_agg(x ORDER BY x) AS ids FROM pg_temp.spec(format(
    '[{"kind": "dg.k", "depends_on": [%s]}, {"kind": "dg.k", "depends_on": [{"spec": 0}]},
      {"kind": "dg.k", "depends_on": [%1$s], "on_dependency_failure": "run"},
      {"kind": "dg.k", "depends_on": [%1$s], "on_dependency_failure": "wait"}]', :p)) AS x \gset
SELECT (:'ids'::bigint[])[1] AS f1, (:'ids'::bigint[])[2] AS f2, (:'ids'::bigint[])[3] AS r1,
       (:'ids'::bigint[])[4] AS w1 \gset
SELECT is(pg_temp.run(:p, false), ARRAY[:r1]::bigint[], 'a failed parent wakes only the dependent that runs anyway');
SELECT is((SELECT status::text || ' ' || error FROM jobs.job WHERE id = :f1), 'failed dependency ' || :p || ' failed',
          'fail: the dependent fails, naming its parent');
SELECT is(pg_temp.reasons(:f1), '{submitted,dependency_failed}', 'fail: its event is dependency_failed (queued -> failed)');
SELECT is((SELECT status::text || ' ' || error FROM jobs.job WHERE id = :f2), 'failed dependency ' || :f1 || ' failed',
          'fail cascades down the graph');
SELECT ok(pg_temp.claimable(:r1), 'run: the dependent is released by the failure');
SELECT ok(NOT pg_temp.claimable(:w1) AND (SELECT status FROM jobs.job WHERE id = :w1) = 'queued',
          'wait: the dependent keeps waiting');
SELECT ok(jobs.replay(:p), 'the failed parent is replayed');
SELECT ok(NOT pg_temp.claimable(:w1), 'wait: still waiting while the replay runs');
SELECT is(pg_temp.run(:p), ARRAY[:w1]::bigint[], 'wait: the replay''s success releases the waiting dependent');
SELECT is((SELECT status FROM jobs.job WHERE id = :f1), 'failed'::jobs.status, 'fail: a failed dependent stays failed after the replay');

-- 3. Dependencies on jobs that already ended (each submit in a statement of its own: a
-- query does not see the rows its own subquery inserts).
SELECT x AS e1 FROM pg_temp.spec(format('[{"kind": "dg.k", "depends_on": [%s]}]', :a)) AS x \gset
SELECT is((SELECT pending_children FROM jobs.job WHERE id = :e1), 0, 'a dependency already done does not hold the job back');
SELECT ok(pg_temp.claimable(:e1), 'a dependency already done: claimable at once');
SELECT id AS dead FROM jobs.submit('dg.k') \gset
SELECT pg_temp.run(:dead, false);
SELECT x AS e2 FROM pg_temp.spec(format('[{"kind": "dg.k", "depends_on": [%s]}]', :dead)) AS x \gset
SELECT is((SELECT status::text || ' ' || error FROM jobs.job WHERE id = :e2), 'failed dependency ' || :dead || ' failed',
          'a dependency already failed fails the new job at once (policy fail)');
SELECT x AS e3 FROM pg_temp.spec(format('[{"kind": "dg.k", "depends_on": [%s], "on_dependency_failure": "wait"}]', :dead)) AS x \gset
SELECT is((SELECT pending_children FROM jobs.job WHERE id = :e3), 1, 'wait on a failed dependency: the job waits for its replay');
SELECT x AS e4 FROM pg_temp.spec(format('[{"kind": "dg.k", "depends_on": [%s], "on_dependency_failure": "run"}]', :dead)) AS x \gset
SELECT ok(pg_temp.claimable(:e4), 'run on a failed dependency: the job is claimable at once');

-- 4. jobs.submit takes them too; fan_out's coordinator adds its children to its dependencies.
SELECT id AS s FROM jobs.submit('dg.k', depends_on => ARRAY[:w1, :a], on_dependency_failure => 'wait') \gset
SELECT is((SELECT pending_children FROM jobs.job WHERE id = :s), 1, 'jobs.submit: depends_on and on_dependency_failure');
SELECT id AS q FROM jobs.submit('dg.k') \gset
SELECT id AS co FROM jobs.fan_out('[{"kind": "dg.k"}, {"kind": "dg.k"}]', format('{"kind": "dg.k", "depends_on": [%s]}', :q)::jsonb) \gset
SELECT is((SELECT pending_children FROM jobs.job WHERE id = :co), 3, 'a fan-out coordinator waits for its children and its dependencies');

-- A dependent cancelled while it waits: its dependency's finish releases the edge but
-- records no release of a job that has ended.
SELECT id AS cp FROM jobs.submit('dg.k') \gset
SELECT id AS cd FROM jobs.submit('dg.k', depends_on => ARRAY[:cp]::bigint[]) \gset
SELECT is((jobs.cancel(:cd, 'not needed')).status, 'failed'::jobs.status, 'a waiting dependent can be cancelled');
SELECT is(pg_temp.run(:cp), '{}'::bigint[], 'the finish of its dependency then wakes nothing');
SELECT is(pg_temp.reasons(:cd), ARRAY['submitted', 'cancelled'], '... and records no release of the cancelled job');
-- Two dependencies failing in one call: each dependent names its own, and a job running
-- anyway after one of them is in the batch's wake.
SELECT id AS f1 FROM jobs.submit('dg.k') \gset
SELECT id AS f2 FROM jobs.submit('dg.k') \gset
SELECT id AS g1 FROM jobs.submit('dg.k', depends_on => ARRAY[:f1]::bigint[]) \gset
SELECT id AS g2 FROM jobs.submit('dg.k', depends_on => ARRAY[:f2]::bigint[]) \gset
SELECT id AS h1 FROM jobs.submit('dg.k', depends_on => ARRAY[:g1]::bigint[], on_dependency_failure => 'run') \gset
SELECT count(*) FROM jobs.claim_many(ARRAY[:f1, :f2]::bigint[], 'w');
SELECT is((SELECT array_agg(w ORDER BY w) FROM jobs.fail_many(ARRAY[:f1, :f2]::bigint[], 'w', '{1,1}', '{x,y}', '{f,f}') AS o, unnest(o.wake) AS w),
          ARRAY[:h1]::bigint[], 'one call failing two dependencies wakes what runs anyway');
SELECT results_eq(format('SELECT id, error FROM jobs.job WHERE id IN (%s, %s) ORDER BY id', :g1, :g2),
                  format($$ VALUES (%s::bigint, 'dependency %s failed'), (%s, 'dependency %s failed') $$, :g1, :f1, :g2, :f2),
                  'each dependent failed by the batch names its own dependency');

-- 5. Bad input: 22023, nothing written.
SELECT count(*) AS jobs_before FROM jobs.job \gset
SELECT throws_ok($$ SELECT jobs.submit_many('[{"kind": "dg.k", "depends_on": [987654321]}]') $$, '22023',
                 'jobs.submit_many: specs[0]: depends_on names unknown job 987654321', 'an unknown id is 22023');
SELECT throws_ok($$ SELECT jobs.submit_many('[{"kind": "dg.k", "depends_on": [{"spec": 0}]}]') $$, '22023', NULL,
                 'a dependency on itself (a cycle) is 22023');
SELECT throws_ok($$ SELECT jobs.submit_many('[{"kind": "dg.k", "depends_on": [{"spec": 1}]}, {"kind": "dg.k"}]') $$, '22023', NULL,
                 'a dependency on a later spec (a cycle in the making) is 22023');
SELECT throws_ok($$ SELECT jobs.submit_many('[{"kind": "dg.k", "depends_on": []}]') $$, '22023', NULL, 'an empty list is 22023');
SELECT throws_ok($$ SELECT jobs.submit_many('[{"kind": "dg.k", "depends_on": [1.5]}]') $$, '22023', NULL, 'a fractional id is 22023');
SELECT throws_ok($$ SELECT jobs.submit_many('[{"kind": "dg.k", "depends_on": "1"}]') $$, '22023', NULL, 'a non-list is 22023');
SELECT throws_ok(format($$ SELECT jobs.submit_many('[{"kind": "dg.k", "depends_on": [%s], "on_dependency_failure": "retry"}]') $$, :a), '22023', NULL,
                 'an unknown policy is 22023');
SELECT throws_ok($$ SELECT jobs.submit_many('[{"kind": "dg.k", "on_dependency_failure": "run"}]') $$, '22023', NULL,
                 'a policy without depends_on is 22023');
SELECT is((SELECT count(*) FROM jobs.job), :jobs_before::bigint, 'refused specs wrote nothing');

-- 6. A parent finishing while its dependent is submitted, in sessions of their own.
SELECT dblink_connect('dg_a', 'dbname=' || current_database());
SELECT dblink_connect('dg_b', 'dbname=' || current_database());
CREATE FUNCTION pg_temp.on(conn text, query text) RETURNS text LANGUAGE sql AS $$
    SELECT x FROM dblink(conn, query) AS t(x text)
$$;
CREATE FUNCTION pg_temp.later(conn text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    answer text;
BEGIN
    SELECT x INTO answer FROM dblink_get_result(conn) AS t(x text);
    PERFORM * FROM dblink_get_result(conn) AS t(x text);
    RETURN answer;
END $$;
CREATE FUNCTION pg_temp.await_lock_wait(marker text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    FOR i IN 1..2000 LOOP
        PERFORM pg_stat_clear_snapshot();
        IF EXISTS (SELECT FROM pg_stat_activity
                    WHERE wait_event_type = 'Lock' AND query LIKE '%' || marker || '%' AND pid <> pg_backend_pid()) THEN
            RETURN true;
        END IF;
        PERFORM pg_sleep(0.005);
    END LOOP;
    RETURN false;
END $$;
SELECT pg_temp.on('dg_a', $$ SELECT jobs.define_type('dg.c', max_retries => 0)::text $$);
-- The parent's completion is in flight (uncommitted) when the dependent is submitted: the
-- submit waits for it, then sees the parent done.
SELECT pg_temp.on('dg_a', $$ SELECT id::text FROM jobs.submit('dg.c') $$) AS c1 \gset
SELECT pg_temp.on('dg_a', format($$ SELECT count(*)::text FROM jobs.claim(%s, 'w') $$, :c1));
SELECT dblink_exec('dg_a', 'BEGIN');
SELECT pg_temp.on('dg_a', format($$ SELECT (jobs.complete(%s, 'w', 1)).accepted::text $$, :c1));
SELECT dblink_send_query('dg_b', format($$ SELECT pending_children::text FROM jobs.submit_many('[{"kind": "dg.c", "depends_on": [%s], "payload": {"m": "dep-1"}}]') $$, :c1));
SELECT ok(pg_temp.await_lock_wait('dep-1'), 'a dependent''s submit waits for its parent''s finish in flight');
SELECT dblink_exec('dg_a', 'COMMIT');
SELECT is(pg_temp.later('dg_b'), '0', 'then it sees the parent done: nothing to wait for');
-- The dependent's submit is in flight when the parent finishes: the finish waits for it,
-- then releases the dependent.
SELECT pg_temp.on('dg_a', $$ SELECT id::text FROM jobs.submit('dg.c') $$) AS c2 \gset
SELECT pg_temp.on('dg_a', format($$ SELECT count(*)::text FROM jobs.claim(%s, 'w') $$, :c2));
SELECT dblink_exec('dg_a', 'BEGIN');
SELECT pg_temp.on('dg_a', format($$ SELECT id::text FROM jobs.submit_many('[{"kind": "dg.c", "depends_on": [%s]}]') $$, :c2)) AS dep2 \gset
SELECT dblink_send_query('dg_b', format($$ SELECT (jobs.complete(%s, 'w', 1, '{"m": "fin-2"}')).wake::text $$, :c2));
SELECT ok(pg_temp.await_lock_wait('fin-2'), 'a parent''s finish waits for a dependent''s submit in flight');
SELECT dblink_exec('dg_a', 'COMMIT');
SELECT is(pg_temp.later('dg_b'), '{' || :dep2 || '}', 'then it finds the new edge and releases the dependent');

SELECT is((SELECT count(*) FROM jobs.audit() WHERE violations > 0), 0::bigint, 'every history passes jobs.audit');
SELECT * FROM finish();

SELECT dblink_exec('dg_a', $$ DELETE FROM jobs.event WHERE job_id IN (SELECT id FROM jobs.job WHERE kind = 'dg.c') $$);
SELECT dblink_exec('dg_a', $$ DELETE FROM jobs.job WHERE kind = 'dg.c' $$);
SELECT dblink_exec('dg_a', $$ DELETE FROM jobs.metric_minute WHERE kind = 'dg.c' $$);
SELECT dblink_exec('dg_a', $$ DELETE FROM jobs.job_type WHERE kind = 'dg.c' $$);
SELECT dblink_disconnect('dg_a');
SELECT dblink_disconnect('dg_b');
ROLLBACK;
