-- Role separation (docs/design.md §4 "Roles"): jobs_producer, jobs_worker and jobs_admin may each call
-- exactly their functions and get 42501 for every other one and for the tables.
BEGIN;
SELECT plan(176);

SELECT jobs.define_type('roles_t');

-- Runs a statement as the current role and returns 'ok' or the SQLSTATE it raised
-- (inside a subtransaction that is always rolled back, so it changes nothing).
CREATE FUNCTION pg_temp.sqlstate_of(stmt text) RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE stmt;
    -- Undo what a successful call did: leave through an exception the handler recognises.
    RAISE EXCEPTION 'rollback probe' USING ERRCODE = 'ZZ999';
EXCEPTION WHEN OTHERS THEN
    RETURN CASE WHEN SQLSTATE = 'ZZ999' THEN 'ok' ELSE SQLSTATE END;
END $$;

-- One harmless call per public function (the arguments do not matter for a 42501).
CREATE TEMP TABLE calls (fn text PRIMARY KEY, stmt text, producer boolean, worker boolean, admin boolean);
INSERT INTO calls VALUES
    ('define_type',            $$ SELECT jobs.define_type('roles_t2') $$,                                   false, false, true),
    ('submit',                 $$ SELECT jobs.submit('roles_t') $$,                                         true,  false, true),
    ('submit_many',            $$ SELECT * FROM jobs.submit_many('[]') $$,                                  true,  false, true),
    ('fan_out',                $$ SELECT jobs.fan_out('[]', '{"kind": "roles_t"}') $$,                      true,  false, true),
    ('mark_enqueue_failed',    $$ SELECT jobs.mark_enqueue_failed(ARRAY[0]::bigint[]) $$,                   true,  false, true),
    ('recover_enqueue_failed', $$ SELECT * FROM jobs.recover_enqueue_failed() $$,                           false, false, true),
    ('claim',                  $$ SELECT * FROM jobs.claim(0, 'w') $$,                                      false, true,  true),
    ('claim_many',             $$ SELECT * FROM jobs.claim_many(ARRAY[0]::bigint[], 'w') $$,                false, true,  true),
    ('claim_next',             $$ SELECT * FROM jobs.claim_next('w', ARRAY['no-such-queue']) $$,            false, true,  true),
    ('heartbeat',              $$ SELECT jobs.heartbeat(0, 'w', 1) $$,                                      false, true,  true),
    ('complete',               $$ SELECT jobs.complete(0, 'w', 1) $$,                                       false, true,  true),
    ('complete_many',          $$ SELECT * FROM jobs.complete_many(ARRAY[0]::bigint[], 'w', ARRAY[1]::bigint[], NULL) $$, false, true, true),
    ('fail',                   $$ SELECT jobs.fail(0, 'w', 1, 'boom') $$,                                   false, true,  true),
    ('fail_many',              $$ SELECT * FROM jobs.fail_many(ARRAY[0]::bigint[], 'w', ARRAY[1]::bigint[], ARRAY['boom'], ARRAY[true]) $$, false, true, true),
    ('heartbeat_many',         $$ SELECT * FROM jobs.heartbeat_many(ARRAY[0]::bigint[], 'w', ARRAY[1]::bigint[]) $$, false, true, true),
    ('signals',                $$ SELECT * FROM jobs.signals(ARRAY[0]::bigint[]) $$,                        true,  true,  true),
    ('queues',                 $$ SELECT * FROM jobs.queues() $$,                                           true,  true,  true),
    ('types',                  $$ SELECT * FROM jobs.types() $$,                                            true,  true,  true),
    ('transitions',            $$ SELECT * FROM jobs.transitions() $$,                                      true,  true,  true),
    ('reap',                   $$ SELECT * FROM jobs.reap() $$,                                             false, false, true),
    ('cancel',                 $$ SELECT jobs.cancel(0) $$,                                                 true,  false, true),
    ('replay',                 $$ SELECT jobs.replay(0) $$,                                                 false, false, true),
    ('stale_queued',           $$ SELECT * FROM jobs.stale_queued('default') $$,                            false, false, true),
    ('prune',                  $$ SELECT jobs.prune() $$,                                                   false, false, true),
    ('get',                    $$ SELECT jobs.get(0) $$,                                                    true,  true,  true),
    ('events',                 $$ SELECT * FROM jobs.events(0) $$,                                          true,  false, true),
    ('children',               $$ SELECT * FROM jobs.children(0) $$,                                        true,  true,  true),
    ('metrics',                $$ SELECT * FROM jobs.metrics() $$,                                          false, false, true),
    ('dead_letters',           $$ SELECT * FROM jobs.dead_letters(ARRAY[0]::bigint[]) $$,                   false, false, true),
    ('compact_metrics',        $$ SELECT jobs.compact_metrics() $$,                                         false, false, true),
    ('list_jobs',              $$ SELECT * FROM jobs.list_jobs() $$,                                        true,  false, true),
    ('queue_depth_counts',     $$ SELECT * FROM jobs.queue_depth_counts() $$,                               false, false, true),
    ('audit',                  $$ SELECT * FROM jobs.audit() $$,                                            false, false, true),
    -- Lease binding: the claims that hand out a lease token, the writes that take one
    -- (overloads: "name#token"), and the admin switch.
    ('claim_with_token',       $$ SELECT * FROM jobs.claim_with_token(0, 'w') $$,                           false, true,  true),
    ('claim_many_with_token',  $$ SELECT * FROM jobs.claim_many_with_token(ARRAY[0]::bigint[], 'w') $$,     false, true,  true),
    ('claim_next_with_token',  $$ SELECT * FROM jobs.claim_next_with_token('w', ARRAY['no-such-queue']) $$, false, true,  true),
    ('heartbeat#token',        $$ SELECT jobs.heartbeat(0, 'w', 1, gen_random_uuid()) $$,                   false, true,  true),
    ('complete#token',         $$ SELECT jobs.complete(0, 'w', 1, NULL, gen_random_uuid()) $$,              false, true,  true),
    ('complete_many#token',    $$ SELECT * FROM jobs.complete_many(ARRAY[0]::bigint[], 'w', ARRAY[1]::bigint[], NULL, ARRAY[gen_random_uuid()]) $$, false, true, true),
    ('fail#token',             $$ SELECT jobs.fail(0, 'w', 1, 'boom', true, gen_random_uuid()) $$,          false, true,  true),
    ('fail_many#token',        $$ SELECT * FROM jobs.fail_many(ARRAY[0]::bigint[], 'w', ARRAY[1]::bigint[], ARRAY['boom'], ARRAY[true], ARRAY[gen_random_uuid()]) $$, false, true, true),
    ('heartbeat_many#token',   $$ SELECT * FROM jobs.heartbeat_many(ARRAY[0]::bigint[], 'w', ARRAY[1]::bigint[], ARRAY[gen_random_uuid()]) $$, false, true, true),
    ('configure_leases',       $$ SELECT * FROM jobs.configure_leases() $$,                                 false, false, true),
    ('configure_producers',    $$ SELECT * FROM jobs.configure_producers() $$,                              false, false, true);
GRANT SELECT ON calls TO PUBLIC;

CREATE TEMP TABLE before_counts AS
SELECT (SELECT count(*) FROM jobs.job) AS jobs_n, (SELECT count(*) FROM jobs.history) AS events_n,
       (SELECT count(*) FROM jobs.job_type) AS types_n,
       (SELECT md5(string_agg(j::text, ',' ORDER BY j.id)) FROM jobs.job AS j) AS jobs_md5;

-- the roles.
SELECT is((SELECT rolcanlogin FROM pg_roles WHERE rolname = 'jobs_producer'), false, 'roles: jobs_producer exists and is NOLOGIN');
SELECT is((SELECT rolcanlogin FROM pg_roles WHERE rolname = 'jobs_worker'), false, 'roles: jobs_worker exists and is NOLOGIN');
SELECT is((SELECT rolcanlogin FROM pg_roles WHERE rolname = 'jobs_admin'), false, 'roles: jobs_admin exists and is NOLOGIN');

-- catalog view of the matrix: a role holds a name when it may execute every overload of it.
CREATE FUNCTION pg_temp.may_execute(role name, fn text) RETURNS boolean LANGUAGE sql STABLE AS $$
    SELECT bool_and(has_function_privilege(role, p.oid, 'EXECUTE')) FROM pg_catalog.pg_proc AS p
     WHERE p.pronamespace = 'jobs'::regnamespace AND p.proname = split_part(fn, '#', 1) $$;
SELECT set_eq($$ SELECT fn FROM calls WHERE pg_temp.may_execute('jobs_producer', fn) $$,
              $$ SELECT fn FROM calls WHERE producer $$,
              'roles: jobs_producer holds EXECUTE on exactly submit, submit_many, fan_out, mark_enqueue_failed, cancel, get, events, children, signals, queues, types, transitions, list_jobs');
SELECT set_eq($$ SELECT fn FROM calls WHERE pg_temp.may_execute('jobs_worker', fn) $$,
              $$ SELECT fn FROM calls WHERE worker $$,
              'roles: jobs_worker holds EXECUTE on exactly claim, claim_many, claim_next, heartbeat, heartbeat_many, complete, complete_many, fail, fail_many, get, children, signals, queues, types, transitions');
SELECT set_eq($$ SELECT fn FROM calls WHERE pg_temp.may_execute('jobs_admin', fn) $$,
              $$ SELECT fn FROM calls $$,
              'roles: jobs_admin holds EXECUTE on every public function');

-- jobs_producer, call by call.
SET LOCAL ROLE jobs_producer;
SELECT is(CASE WHEN pg_temp.sqlstate_of(c.stmt) = '42501' THEN 'denied (42501)' ELSE 'allowed' END,
          CASE WHEN c.producer THEN 'allowed' ELSE 'denied (42501)' END,
          format('roles: jobs_producer calling jobs.%s is %s', c.fn, CASE WHEN c.producer THEN 'allowed' ELSE 'denied with 42501' END))
  FROM calls AS c ORDER BY c.fn;
RESET ROLE;

-- jobs_worker, call by call.
SET LOCAL ROLE jobs_worker;
SELECT is(CASE WHEN pg_temp.sqlstate_of(c.stmt) = '42501' THEN 'denied (42501)' ELSE 'allowed' END,
          CASE WHEN c.worker THEN 'allowed' ELSE 'denied (42501)' END,
          format('roles: jobs_worker calling jobs.%s is %s', c.fn, CASE WHEN c.worker THEN 'allowed' ELSE 'denied with 42501' END))
  FROM calls AS c ORDER BY c.fn;
RESET ROLE;

-- jobs_admin, call by call.
SET LOCAL ROLE jobs_admin;
SELECT is(CASE WHEN pg_temp.sqlstate_of(c.stmt) = '42501' THEN 'denied (42501)' ELSE 'allowed' END,
          'allowed', format('roles: jobs_admin calling jobs.%s is allowed', c.fn))
  FROM calls AS c ORDER BY c.fn;
RESET ROLE;

-- the probing above changed nothing.
SELECT is((SELECT (count(*), (SELECT count(*) FROM jobs.history), (SELECT count(*) FROM jobs.job_type),
                   md5(string_agg(j::text, ',' ORDER BY j.id)))::text FROM jobs.job AS j),
          (SELECT (jobs_n, events_n, types_n, jobs_md5)::text FROM before_counts),
          'roles: probing every function as every role changed no job, event or job type');

-- direct table access is denied to every role.
SET LOCAL ROLE jobs_producer;
SELECT throws_ok($$ SELECT * FROM jobs.job $$, '42501', NULL, 'roles: jobs_producer SELECT on jobs.job -> 42501');
SELECT throws_ok($$ UPDATE jobs.job SET status = 'done' $$, '42501', NULL, 'roles: jobs_producer UPDATE on jobs.job -> 42501');
SELECT throws_ok($$ SELECT * FROM jobs.event $$, '42501', NULL, 'roles: jobs_producer SELECT on jobs.event -> 42501');
SELECT throws_ok($$ SELECT * FROM jobs.history $$, '42501', NULL, 'roles: jobs_producer SELECT on jobs.history -> 42501');
SELECT throws_ok($$ SELECT * FROM jobs.claimable $$, '42501', NULL, 'roles: jobs_producer SELECT on jobs.claimable -> 42501');
RESET ROLE;
SET LOCAL ROLE jobs_worker;
SELECT throws_ok($$ SELECT * FROM jobs.job $$, '42501', NULL, 'roles: jobs_worker SELECT on jobs.job -> 42501');
SELECT throws_ok($$ UPDATE jobs.job SET status = 'done' $$, '42501', NULL, 'roles: jobs_worker UPDATE on jobs.job -> 42501');
SELECT throws_ok($$ INSERT INTO jobs.event (job_id, to_status, lease_version, reason) VALUES (1, 'done', 1, 'completed') $$,
                 '42501', NULL, 'roles: jobs_worker INSERT on jobs.event -> 42501');
SELECT throws_ok($$ SELECT * FROM jobs.job_type $$, '42501', NULL, 'roles: jobs_worker SELECT on jobs.job_type -> 42501');
RESET ROLE;
SET LOCAL ROLE jobs_admin;
SELECT throws_ok($$ SELECT * FROM jobs.job $$, '42501', NULL, 'roles: jobs_admin SELECT on jobs.job -> 42501');
SELECT throws_ok($$ UPDATE jobs.job SET status = 'done' $$, '42501', NULL, 'roles: jobs_admin UPDATE on jobs.job -> 42501');
SELECT throws_ok($$ DELETE FROM jobs.event $$, '42501', NULL, 'roles: jobs_admin DELETE on jobs.event -> 42501');
SELECT throws_ok($$ UPDATE jobs.job_type SET max_retries = 0 $$, '42501', NULL, 'roles: jobs_admin UPDATE on jobs.job_type -> 42501');
RESET ROLE;

-- a real lifecycle through the roles, each step by the role the contract names.
SET LOCAL ROLE jobs_admin;
SELECT is((jobs.define_type('roles_k', max_retries => 2)).max_retries, 2, 'roles: jobs_admin declares a kind with define_type');
RESET ROLE;
SET LOCAL ROLE jobs_producer;
SELECT is(set_config('roles.id', (jobs.submit('roles_k', '{"n": 1}')).id::text, true) IS NOT NULL, true,
          'roles: jobs_producer submits a job');
SELECT is((jobs.get(current_setting('roles.id')::bigint)).status, 'queued'::jobs.status, 'roles: jobs_producer reads its job: queued');
SELECT throws_ok($$ SELECT * FROM jobs.claim(current_setting('roles.id')::bigint, 'w') $$, '42501', NULL,
                 'roles: jobs_producer cannot claim the job it submitted (42501)');
RESET ROLE;
SELECT is((SELECT status FROM jobs.job WHERE id = current_setting('roles.id')::bigint), 'queued'::jobs.status,
          'roles: the denied claim left the job queued');
SET LOCAL ROLE jobs_worker;
SELECT is((SELECT lease_version FROM jobs.claim(current_setting('roles.id')::bigint, 'w')), 1::bigint,
          'roles: jobs_worker claims it, lease_version 1');
SELECT is((jobs.heartbeat(current_setting('roles.id')::bigint, 'w', 1)).alive, true, 'roles: jobs_worker heartbeats it');
SELECT throws_ok($$ SELECT jobs.cancel(current_setting('roles.id')::bigint) $$, '42501', NULL,
                 'roles: jobs_worker cannot cancel (42501)');
SELECT throws_ok($$ SELECT * FROM jobs.events(current_setting('roles.id')::bigint) $$, '42501', NULL,
                 'roles: jobs_worker cannot read events (42501)');
SELECT is((jobs.complete(current_setting('roles.id')::bigint, 'w', 1, '{"ok": true}')).accepted, true,
          'roles: jobs_worker completes it');
SELECT is((jobs.get(current_setting('roles.id')::bigint)).result, '{"ok": true}'::jsonb, 'roles: jobs_worker reads the result with get');
SELECT is_empty($$ SELECT * FROM jobs.children(current_setting('roles.id')::bigint) $$, 'roles: jobs_worker may call children');
RESET ROLE;
SET LOCAL ROLE jobs_producer;
SELECT is(ARRAY(SELECT reason FROM jobs.events(current_setting('roles.id')::bigint)), ARRAY['submitted', 'claimed', 'completed'],
          'roles: jobs_producer reads the history with events');
SELECT is((jobs.cancel(current_setting('roles.id')::bigint)).accepted, false, 'roles: jobs_producer may cancel (a done job: no-op)');
SELECT throws_ok($$ SELECT jobs.replay(current_setting('roles.id')::bigint) $$, '42501', NULL,
                 'roles: jobs_producer cannot replay (42501)');
SELECT throws_ok($$ SELECT jobs.define_type('roles_k') $$, '42501', NULL, 'roles: jobs_producer cannot define_type (42501)');
RESET ROLE;
SELECT is((SELECT max_retries FROM jobs.job_type WHERE kind = 'roles_k'), 2, 'roles: the denied define_type left the kind unchanged');
SET LOCAL ROLE jobs_admin;
SELECT is(jobs.replay(current_setting('roles.id')::bigint), false, 'roles: jobs_admin may replay (a done job: false)');
SELECT is(jobs.prune('0 seconds'), 0::bigint, 'roles: jobs_admin may prune (nothing finished before now)');
-- The observability view: SELECT for jobs_admin only, nothing else for anyone.
SELECT is(pg_temp.sqlstate_of($$ SELECT * FROM jobs.queue_depth $$), 'ok', 'roles: jobs_admin may read jobs.queue_depth');
SELECT ok(NOT has_table_privilege('jobs_admin', 'jobs.queue_depth', 'INSERT, UPDATE, DELETE, TRUNCATE'),
          'roles: jobs_admin holds no write privilege on jobs.queue_depth');
RESET ROLE;
SET LOCAL ROLE jobs_producer;
SELECT is(pg_temp.sqlstate_of($$ SELECT * FROM jobs.queue_depth $$), '42501', 'roles: jobs_producer cannot read jobs.queue_depth (42501)');
RESET ROLE;
SET LOCAL ROLE jobs_worker;
SELECT is(pg_temp.sqlstate_of($$ SELECT * FROM jobs.queue_depth $$), '42501', 'roles: jobs_worker cannot read jobs.queue_depth (42501)');
SELECT is(pg_temp.sqlstate_of($$ SELECT * FROM jobs.metric_minute $$), '42501', 'roles: jobs_worker cannot read the rollup jobs.metric_minute (42501)');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
