-- Style tests: catalog checks that keep the rules true for every function in schema jobs,
-- present and future (docs/design.md §4 "Every function"), plus the exact public surface:
-- function signatures and return types, the status enum and the composite types.
BEGIN;
SELECT plan(90);

-- The public API of docs/design.md §4 plus the internal helpers of docs/decisions.md.
CREATE TEMP TABLE expected_fn (signature text, returns text, argnames text[], public boolean);
INSERT INTO expected_fn VALUES
    ('jobs.define_type(text,text,interval,interval,integer,interval,interval,integer,interval,numeric,numeric,bigint,interval,numeric,integer,integer,integer,interval,text,integer)', 'jobs.job_type',
     '{kind,queue,lease_timeout,timeout,max_retries,backoff_base,backoff_max,max_payload_bytes,slo_latency,slo_target,slo_success,max_backlog,run_time_budget,max_failure_rate,priority,max_running,rate_limit,rate_period,on_dead,max_running_per_key}', true),
    ('jobs.submit(text,jsonb,text,timestamp with time zone,text,boolean,integer,jobs.status[],interval,text,text,bigint[],text,text)', 'jobs.job',
     '{kind,payload,idempotency_key,run_after,ordering_key,notify,priority,unique_while,unique_for,debounce,traceparent,depends_on,on_dependency_failure,concurrency_key}', true),
    ('jobs.dependencies(bigint)', 'TABLE(depends_on bigint, kind text, status jobs.status, on_failure text, released_at timestamp with time zone)', '{job_id,depends_on,kind,status,on_failure,released_at}', true),
    ('jobs.dependents(bigint)', 'TABLE(job_id bigint, kind text, status jobs.status, on_failure text, released_at timestamp with time zone)', '{job_id,job_id,kind,status,on_failure,released_at}', true),
    ('jobs.unknown_dependency(jsonb)', NULL, NULL, false),
    ('jobs.edge_outcome(jobs.status,text)', NULL, NULL, false),
    ('jobs.trace_contexts(bigint[])', 'TABLE(job_id bigint, traceparent text)', '{job_ids,job_id,traceparent}', true),
    ('jobs.pause(text)', 'boolean', '{queue}', true),
    ('jobs.resume(text)', 'boolean', '{queue}', true),
    ('jobs.paused_queues()', 'TABLE(queue text, paused_at timestamp with time zone, paused_by text)', '{queue,paused_at,paused_by}', true),
    ('jobs.held_back(bigint[])', 'setof jobs.signal', '{job_ids}', true),
    ('jobs.unclaimed(bigint[],text[])', 'TABLE(job_id bigint, cause text)', '{job_ids,queues,job_id,cause}', true),
    ('jobs.keyed_queues(text[])', 'TABLE(queue text)', '{queues,queue}', true),
    ('jobs.admit_limited(bigint[],text[],text[],boolean)', NULL, NULL, false),
    ('jobs.submit_many(jsonb)', 'setof jobs.job', '{specs}', true),
    ('jobs.fan_out(jsonb,jsonb)', 'jobs.job', '{children,then_spec}', true),
    ('jobs.mark_enqueue_failed(bigint[])', 'integer', '{job_ids}', true),
    ('jobs.recover_enqueue_failed(integer)', 'setof jobs.signal', '{max_jobs}', true),
    ('jobs.claim(bigint,text,text[])', 'setof jobs.lease', '{job_id,worker,queues}', true),
    ('jobs.claim_many(bigint[],text,text[])', 'setof jobs.lease', '{job_ids,worker,queues}', true),
    ('jobs.claim_next(text,text[],integer)', 'setof jobs.lease', '{worker,queues,max_jobs}', true),
    ('jobs.reap(integer)', 'setof jobs.signal', '{max_jobs}', true),
    ('jobs.cancel(bigint,text)', 'jobs.outcome', '{job_id,reason}', true),
    ('jobs.replay(bigint)', 'boolean', '{job_id}', true),
    ('jobs.stale_queued(text,interval,integer)', 'setof jobs.signal', '{queue,older_than,max_jobs}', true),
    ('jobs.prune(interval,integer)', 'bigint', '{older_than,max_jobs}', true),
    ('jobs.create_event_partitions(interval)', 'integer', '{ahead}', true),
    ('jobs.drop_event_partitions(interval)', 'integer', '{older_than}', true),
    ('jobs.get(bigint)', 'jobs.job', '{job_id}', true),
    ('jobs.events(bigint)', 'setof jobs.event', '{job_id}', true),
    ('jobs.children(bigint)', 'setof jobs.job', '{job_id}', true),
    ('jobs.signals(bigint[])', 'setof jobs.signal', '{job_ids}', true),
    ('jobs.queues()', 'TABLE(queue text)', '{queue}', true),
    ('jobs.types()', 'setof jobs.job_type', NULL, true),
    ('jobs.transitions()', 'TABLE(reason text, from_status jobs.status, to_status jobs.status, bumps_lease_version boolean)', '{reason,from_status,to_status,bumps_lease_version}', true),
    ('jobs.check_worker(text,text)', NULL, NULL, false),
    ('jobs.check_queue(text,text)', NULL, NULL, false),
    ('jobs.own_jobs_only(boolean)', NULL, NULL, false),
    ('jobs.key_owner()', NULL, NULL, false),
    ('jobs.parse_timestamptz(text)', NULL, NULL, false),
    ('jobs.parse_interval(text)', NULL, NULL, false),
    ('jobs.finish_leases(bigint[],text[],bigint[],jobs.verdict[],jsonb[],text[],uuid[],text,interval[])', NULL, NULL, false),
    ('jobs.lease_tokens(bigint[],bigint[])', NULL, NULL, false),
    ('jobs.with_lease_tokens(jobs.lease[])', NULL, NULL, false),
    ('jobs.extend_leases(bigint[],text,bigint[],uuid[])', NULL, NULL, false),
    ('jobs.claim_with_token(bigint,text,text[])', 'setof jobs.lease_grant', '{job_id,worker,queues}', true),
    ('jobs.claim_many_with_token(bigint[],text,text[])', 'setof jobs.lease_grant', '{job_ids,worker,queues}', true),
    ('jobs.claim_next_with_token(text,text[],integer)', 'setof jobs.lease_grant', '{worker,queues,max_jobs}', true),
    ('jobs.heartbeat(bigint,text,bigint,uuid)', 'jobs.heartbeat', '{job_id,worker,lease_version,token}', true),
    ('jobs.complete(bigint,text,bigint,jsonb,uuid)', 'jobs.outcome', '{job_id,worker,lease_version,result,token}', true),
    ('jobs.complete_many(bigint[],text,bigint[],jsonb[],uuid[])', 'setof jobs.outcome', '{job_ids,worker,lease_versions,results,tokens}', true),
    ('jobs.fail(bigint,text,bigint,text,boolean,uuid)', 'jobs.outcome', '{job_id,worker,lease_version,error,retryable,token}', true),
    ('jobs.fail_many(bigint[],text,bigint[],text[],boolean[],uuid[])', 'setof jobs.outcome', '{job_ids,worker,lease_versions,errors,retryable,tokens}', true),
    ('jobs.heartbeat_many(bigint[],text,bigint[],uuid[])', 'TABLE(job_id bigint, held boolean, alive boolean, cancel_requested boolean, lease_expires_at timestamp with time zone)', '{job_ids,worker,lease_versions,tokens,job_id,held,alive,cancel_requested,lease_expires_at}', true),
    ('jobs.configure_producers(boolean)', 'TABLE(producer_ownership boolean, updated_at timestamp with time zone)', '{ownership,producer_ownership,updated_at}', true),
    ('jobs.configure_relay(text)', 'TABLE(relay_source text, read_upto bigint, changed_at timestamp with time zone)', '{source,relay_source,read_upto,changed_at}', true),
    ('jobs.poll_submitted(integer)', 'setof jobs.signal', '{max_ids}', true),
    ('jobs.configure_redis(text)', 'TABLE(redis_namespace text, updated_at timestamp with time zone)', '{namespace,redis_namespace,updated_at}', true),
    ('jobs.redis_namespace()', 'text', NULL, true),
    ('jobs.configure_leases(boolean,boolean)', 'TABLE(session_role_bound boolean, lease_token_required boolean, updated_at timestamp with time zone)', '{bind_session_role,require_lease_token,session_role_bound,lease_token_required,updated_at}', true),
    ('jobs.raise_lease_lost(text,bigint,text,bigint)', NULL, NULL, false),
    ('jobs.backoff_delay(integer,interval,interval)', NULL, NULL, false),
    ('jobs.grant_leases(bigint[],text,boolean,text[])', NULL, NULL, false),
    ('jobs.release_dependents(bigint[])', NULL, NULL, false),
    ('jobs.insert_jobs(text,jsonb,bigint,boolean)', NULL, NULL, false),
    ('jobs.insert_job_rows(text,jsonb,bigint,boolean)', NULL, NULL, false),
    ('jobs.metrics(interval)', 'TABLE(kind text, queue text, window_start timestamp with time zone, window_seconds double precision, submitted bigint, started bigint, succeeded bigint, failed bigint, retried bigint, reaped bigint, cancelled bigint, dead_lettered bigint, ended_after_0 bigint, ended_after_1 bigint, ended_after_2 bigint, ended_after_3_plus bigint, wait_p50 double precision, wait_p95 double precision, wait_p99 double precision, run_p50 double precision, run_p95 double precision, run_p99 double precision, latency_p50 double precision, latency_p95 double precision, latency_p99 double precision, slo_latency double precision, slo_target numeric, slo_met bigint, slo_attainment double precision, error_budget_remaining double precision, success_rate double precision, slo_success_target numeric, dead_letter_rate double precision, failure_rate double precision, max_backlog bigint, run_time_budget double precision, max_failure_rate numeric)', '{since,kind,queue,window_start,window_seconds,submitted,started,succeeded,failed,retried,reaped,cancelled,dead_lettered,ended_after_0,ended_after_1,ended_after_2,ended_after_3_plus,wait_p50,wait_p95,wait_p99,run_p50,run_p95,run_p99,latency_p50,latency_p95,latency_p99,slo_latency,slo_target,slo_met,slo_attainment,error_budget_remaining,success_rate,slo_success_target,dead_letter_rate,failure_rate,max_backlog,run_time_budget,max_failure_rate}', true),
    ('jobs.compact_metrics(integer)', 'integer', '{max_rows}', true),
    ('jobs.audit(interval,integer)', 'TABLE(check_name text, violations bigint, example_job_ids bigint[], description text)', '{reaper_interval,examples,check_name,violations,example_job_ids,description}', true),
    ('jobs.queue_depth_counts()', 'TABLE(queue text, kind text, queued_ready bigint, queued_delayed bigint, queued_blocked bigint, processing bigint, processing_expired bigint, enqueue_failed bigint, oldest_ready_age double precision)', '{queue,kind,queued_ready,queued_delayed,queued_blocked,processing,processing_expired,enqueue_failed,oldest_ready_age}', true),
    ('jobs.list_jobs(text,jobs.status,bigint,integer,text,text)', 'setof jobs.job', '{kind,status,before_id,max_jobs,queue,ordering_key}', true),
    ('jobs.dead_letters(bigint[])', 'TABLE(id bigint, kind text, queue text, error text, retry_count integer, max_retries integer, reason text, finished_at timestamp with time zone)', '{job_ids,id,kind,queue,error,retry_count,max_retries,reason,finished_at}', true),
    ('jobs.tally(text[],text[],boolean[],double precision[],double precision[],double precision[],integer[],bigint[])', NULL, NULL, false),
    ('jobs.compensate(bigint[],text[])', NULL, NULL, false),
    ('jobs.claim_pages(integer,interval)', 'setof jobs.page', '{max_pages,hold}', true),
    ('jobs.settle_pages(bigint[],text[],interval,interval)', 'integer', '{page_ids,errors,retry_base,retry_max}', true),
    ('jobs.pages(boolean,integer)', 'setof jobs.page', '{undelivered_only,max_pages}', true),
    ('jobs.repeat_differences(jsonb)', 'TABLE(pos integer, idempotency_key text, job_id bigint, differs text[])', '{specs,pos,idempotency_key,job_id,differs}', true),
    ('jobs.page_backlog()', 'TABLE(undelivered bigint, failing bigint, oldest_at timestamp with time zone)', '{undelivered,failing,oldest_at}', true),
    ('jobs.histogram_from(integer[],integer[])', NULL, NULL, false),
    ('jobs.merge_metrics(jobs.metric_minute[])', NULL, NULL, false),
    ('jobs.schedule(text,text,text,jsonb,text,text,boolean)', 'jobs.schedule', '{name,cron,kind,payload,timezone,missed,enabled}', true),
    ('jobs.unschedule(text)', 'boolean', '{name}', true),
    ('jobs.schedules()', 'setof jobs.schedule', NULL, true),
    ('jobs.enqueue_tick(text,timestamp with time zone,timestamp with time zone)', 'TABLE(job_id bigint, created boolean, queue text, run_after timestamp with time zone, signal boolean)', '{name,tick,next_tick,job_id,created,queue,run_after,signal}', true),
    ('jobs.skip_ticks(text,timestamp with time zone,timestamp with time zone)', 'setof jobs.schedule', '{name,through,next_tick}', true),
    ('jobs.histogram_add(integer[],integer[])', NULL, NULL, false),
    ('jobs.max_snoozes()', 'integer', NULL, true),
    ('jobs.snooze(bigint,text,bigint,interval,uuid)', 'jobs.outcome', '{job_id,worker,lease_version,delay,token}', true),
    ('jobs.snooze_many(bigint[],text,bigint[],interval[],uuid[])', 'setof jobs.outcome', '{job_ids,worker,lease_versions,delays,tokens}', true),
    ('jobs.progress(bigint,text,bigint,jsonb,uuid)', 'jobs.heartbeat', '{job_id,worker,lease_version,progress,token}', true),
    ('jobs.requeue_failed(bigint[])', NULL, NULL, false),
    ('jobs.end_unheld(bigint[],text,text[])', NULL, NULL, false),
    ('jobs.hold_lease(text,bigint,text,bigint,uuid)', NULL, NULL, false),
    ('jobs.finish_lease(text,bigint,text,bigint,jobs.verdict,jsonb,text,uuid,interval)', NULL, NULL, false),
    ('jobs.replay_many(text,text,timestamp with time zone,integer)', 'setof jobs.signal', '{kind,error_like,failed_since,max_jobs}', true),
    ('jobs.histogram_quantile(bigint[],double precision)', NULL, NULL, false);

-- Every function in schema jobs, whatever is added later.
CREATE TEMP VIEW jobs_fn AS
SELECT p.oid, p.oid::regprocedure::text AS signature, p.prosecdef, p.proconfig, p.proacl, p.proowner
  FROM pg_catalog.pg_proc AS p
 WHERE p.pronamespace = 'jobs'::regnamespace;

-- rules for every function (pg_proc driven).
SELECT isnt_empty($$ SELECT 1 FROM jobs_fn $$, 'style: the catalog query finds the functions of schema jobs');
SELECT is_empty($$ SELECT signature FROM jobs_fn WHERE NOT prosecdef $$,
                'style: every jobs function is SECURITY DEFINER');
SELECT is_empty($$ SELECT signature FROM jobs_fn
                    WHERE proconfig IS NULL
                       OR proconfig[1] IS DISTINCT FROM 'search_path=pg_catalog, pg_temp'
                       OR NOT proconfig[2:] @> ARRAY['jit=off']
                       OR NOT proconfig[2:] <@ ARRAY['jit=off', 'plan_cache_mode=force_generic_plan',
                                                     'enable_seqscan=off', 'enable_nestloop=off', 'enable_sort=off'] $$,
                'style: every jobs function pins search_path = pg_catalog, pg_temp, turns JIT off (and at most forces generic plans, index-driven joins and hashed grouping)');
-- A session plans its statements once, often on a table that is still empty; a generic plan
-- made then can scan the table for "id = ANY (ids)" and keep scanning it once it holds
-- millions of rows (docs/decisions.md, "Batch statements are planned the same on any table").
SELECT is_empty($$ SELECT f.signature FROM jobs_fn AS f JOIN pg_catalog.pg_proc AS p ON p.oid = f.oid
                    WHERE p.prosrc ~ '\mid = ANY \('
                      AND NOT coalesce(f.proconfig, '{}') @> ARRAY['enable_seqscan=off'] $$,
                'style: every jobs function that looks rows up by id = ANY (...) turns sequential scans off');
-- A CTE's or subquery's whole row is an anonymous record: aggregated bare and assigned to a
-- typed array (jobs.job[]), every row goes through its text form (docs/decisions.md,
-- "Whole rows are aggregated with their type").
SELECT is_empty($$ SELECT f.signature FROM jobs_fn AS f JOIN pg_catalog.pg_proc AS p ON p.oid = f.oid
                    WHERE p.prosrc ~ 'array_agg\(\s*(DISTINCT\s+)?[a-z_]+\s*(\)|ORDER|FILTER)' $$,
                'style: no jobs function aggregates a bare row alias (cast it to its composite type)');
SELECT is_empty($$ SELECT signature FROM jobs_fn
                    WHERE coalesce(btrim(obj_description(oid, 'pg_proc')), '') = '' $$,
                'style: every jobs function has a COMMENT');
SELECT is_empty($$ SELECT signature FROM jobs_fn
                    WHERE proacl IS NULL
                       OR EXISTS (SELECT 1 FROM aclexplode(proacl) AS a WHERE a.grantee = 0) $$,
                'style: no jobs function is executable by PUBLIC (explicit ACL without a PUBLIC entry)');
SELECT is_empty($$ SELECT f.signature, a.grantee::regrole
                     FROM jobs_fn AS f, aclexplode(f.proacl) AS a
                    WHERE a.grantee <> f.proowner
                      AND a.grantee NOT IN ('jobs_producer'::regrole, 'jobs_worker'::regrole, 'jobs_admin'::regrole) $$,
                'style: jobs functions are granted only to the owner and the jobs_* roles');
SELECT is_empty($$ SELECT f.signature, a.grantee::regrole
                     FROM jobs_fn AS f JOIN expected_fn AS e ON e.signature = f.signature AND NOT e.public,
                          aclexplode(f.proacl) AS a
                    WHERE a.grantee <> f.proowner $$,
                'style: internal helper functions are granted to no role');

-- Never a bare RAISE (P0001): every RAISE EXCEPTION carries its own ERRCODE and a HINT (docs/design.md §5).
SELECT is_empty($$ SELECT f.signature FROM jobs_fn AS f JOIN pg_proc AS p ON p.oid = f.oid
                    WHERE regexp_count(p.prosrc, '\mRAISE\s+EXCEPTION\M', 1, 'i')
                          <> regexp_count(p.prosrc, '\mERRCODE\s*=\s*''(JB00[1-5]|22023|22003)''', 1, 'i')
                       OR regexp_count(p.prosrc, '\mRAISE\s+EXCEPTION\M', 1, 'i')
                          <> regexp_count(p.prosrc, '\mHINT\s*=', 1, 'i') $$,
                'style: every RAISE EXCEPTION in a jobs function sets a documented SQLSTATE (JB001-JB005, 22023, 22003) and a HINT');

-- a fresh role (created here, rolled back) cannot execute any jobs function.
CREATE ROLE jobs_style_probe NOLOGIN;
SELECT is_empty($$ SELECT signature FROM jobs_fn WHERE has_function_privilege('jobs_style_probe', oid, 'EXECUTE') $$,
                'style: a fresh role without grants can execute no jobs function');

-- the private relations.
SELECT is_empty($$ SELECT c.oid::regclass, a.grantee::regrole, a.privilege_type
                     FROM pg_class AS c, aclexplode(coalesce(c.relacl, acldefault('r', c.relowner))) AS a
                    WHERE c.relnamespace = 'jobs'::regnamespace
                      AND c.relkind IN ('r', 'v', 'm', 'p', 'f', 'S')
                      AND a.grantee <> c.relowner
                      -- the one exception: the observability view, read-only, for jobs_admin
                      AND NOT (c.oid = 'jobs.queue_depth'::regclass AND a.grantee = 'jobs_admin'::regrole
                               AND a.privilege_type = 'SELECT') $$,
                'style: no role but the owner holds any privilege on a table, view or sequence of schema jobs (but SELECT on jobs.queue_depth for jobs_admin)');
SELECT is_empty($$ SELECT c.oid::regclass, at.attname
                     FROM pg_class AS c JOIN pg_attribute AS at ON at.attrelid = c.oid
                    WHERE c.relnamespace = 'jobs'::regnamespace AND at.attacl IS NOT NULL $$,
                'style: no column-level grants on schema jobs relations');
SELECT set_eq($$ SELECT c.oid::regclass::text FROM pg_class AS c
                  WHERE c.oid IN (to_regclass('jobs.job'), to_regclass('jobs.job_type'),
                                  to_regclass('jobs.event'), to_regclass('jobs.history'), to_regclass('jobs.claimable')) $$,
              ARRAY['jobs.job', 'jobs.job_type', 'jobs.event', 'jobs.history', 'jobs.claimable'],
              'style: the private relations jobs.job, jobs.job_type, jobs.event, jobs.history and jobs.claimable exist');
SELECT is_empty($$ SELECT r.rolname, t.rel, p.priv
                     FROM pg_roles AS r,
                          unnest(ARRAY['jobs.job', 'jobs.job_type', 'jobs.event', 'jobs.history', 'jobs.claimable']) AS t(rel),
                          unnest(ARRAY['SELECT', 'INSERT', 'UPDATE', 'DELETE', 'TRUNCATE', 'REFERENCES', 'TRIGGER']) AS p(priv)
                    WHERE (r.rolname IN ('jobs_producer', 'jobs_worker', 'jobs_admin', 'jobs_style_probe'))
                      AND has_table_privilege(r.oid, t.rel, p.priv) $$,
                'style: jobs_producer, jobs_worker, jobs_admin and a fresh role have no privilege on the private relations');

-- the partitions of jobs.event, however many the reaper created: private like their parent.
SELECT is_empty($$ SELECT c.relname FROM pg_inherits AS i JOIN pg_class AS c ON c.oid = i.inhrelid
                    WHERE i.inhparent = 'jobs.event'::regclass
                      AND c.relname !~ '^event_([0-9]{8}|default)$' $$,
                'style: the partitions of jobs.event are event_YYYYMMDD and event_default');
SELECT is_empty($$ SELECT r.rolname, c.oid::regclass, p.priv
                     FROM pg_inherits AS i JOIN pg_class AS c ON c.oid = i.inhrelid, pg_roles AS r,
                          unnest(ARRAY['SELECT', 'INSERT', 'UPDATE', 'DELETE', 'TRUNCATE', 'REFERENCES', 'TRIGGER']) AS p(priv)
                    WHERE i.inhparent = 'jobs.event'::regclass
                      AND r.rolname IN ('jobs_producer', 'jobs_worker', 'jobs_admin', 'jobs_style_probe')
                      AND has_table_privilege(r.oid, c.oid, p.priv) $$,
                'style: jobs_producer, jobs_worker, jobs_admin and a fresh role have no privilege on any partition of jobs.event');
SELECT is_empty($$ SELECT c.relname FROM pg_inherits AS i JOIN pg_class AS c ON c.oid = i.inhrelid
                    WHERE i.inhparent = 'jobs.event'::regclass
                      AND NOT EXISTS (SELECT 1 FROM pg_inherits AS ii JOIN pg_index AS x ON x.indexrelid = ii.inhrelid
                                       WHERE ii.inhparent = 'jobs.event_job_idx'::regclass AND x.indrelid = c.oid) $$,
                'style: every partition of jobs.event carries its piece of event_job_idx (job_id, id)');

-- exactly the expected functions, nothing more, nothing less.
SELECT set_eq($$ SELECT signature FROM jobs_fn $$, $$ SELECT signature FROM expected_fn $$,
              'style: schema jobs holds exactly the contract functions and the documented internal helpers');

-- each public signature exists (has_function with argument types).
SELECT has_function('jobs', 'define_type', ARRAY['text','text','interval','interval','integer','interval','interval','integer','interval','numeric','numeric','bigint','interval','numeric','integer','integer','integer','interval','text','integer'], 'style: jobs.define_type(kind, queue, lease_timeout, timeout, max_retries, backoff_base, backoff_max, max_payload_bytes, slo_latency, slo_target, slo_success, max_backlog, run_time_budget, max_failure_rate, priority, max_running, rate_limit, rate_period, on_dead, max_running_per_key) exists');
SELECT has_function('jobs', 'submit', ARRAY['text','jsonb','text','timestamp with time zone','text','boolean','integer','jobs.status[]','interval','text','text','bigint[]','text','text'], 'style: jobs.submit(text, jsonb, text, timestamptz, text, boolean, integer, jobs.status[], interval, text, text, bigint[], text, text) exists');
SELECT has_function('jobs', 'submit_many', ARRAY['jsonb'], 'style: jobs.submit_many(jsonb) exists');
SELECT has_function('jobs', 'fan_out', ARRAY['jsonb','jsonb'], 'style: jobs.fan_out(jsonb, jsonb) exists');
SELECT has_function('jobs', 'mark_enqueue_failed', ARRAY['bigint[]'], 'style: jobs.mark_enqueue_failed(bigint[]) exists');
SELECT has_function('jobs', 'recover_enqueue_failed', ARRAY['integer'], 'style: jobs.recover_enqueue_failed(integer) exists');
SELECT has_function('jobs', 'claim', ARRAY['bigint','text','text[]'], 'style: jobs.claim(bigint, text, text[]) exists');
SELECT has_function('jobs', 'claim_many', ARRAY['bigint[]','text','text[]'], 'style: jobs.claim_many(bigint[], text, text[]) exists');
SELECT has_function('jobs', 'claim_next', ARRAY['text','text[]','integer'], 'style: jobs.claim_next(text, text[], integer) exists');
-- One token convention (docs/design.md, "Lease tokens"): every write to a held lease takes
-- its token last, defaulting to NULL, and no token-less overload is left; the calls of the
-- first release, without a token, still resolve (PREPARE resolves without running).
SELECT is_empty($$ SELECT p.oid::regprocedure::text FROM pg_proc AS p
                    WHERE p.pronamespace = 'jobs'::regnamespace
                      AND p.proname IN ('complete', 'complete_many', 'fail', 'fail_many', 'heartbeat', 'heartbeat_many',
                                        'snooze', 'snooze_many', 'progress')
                      AND NOT (p.pronargdefaults >= 1 AND p.proargnames[p.pronargs] IN ('token', 'tokens')
                               AND p.proargtypes[p.pronargs - 1] IN ('uuid'::regtype, 'uuid[]'::regtype)) $$,
                'style: every lease write takes token/tokens last, with a default, and has no other form');
SELECT lives_ok($$ PREPARE tokenless AS
                   SELECT jobs.heartbeat(1, 'w', 1), jobs.complete(1, 'w', 1), jobs.complete(1, 'w', 1, '{}'),
                          jobs.complete_many(ARRAY[1::bigint], 'w', ARRAY[1::bigint], ARRAY[NULL::jsonb]),
                          jobs.fail(1, 'w', 1, 'e'), jobs.fail(1, 'w', 1, 'e', false),
                          jobs.fail_many(ARRAY[1::bigint], 'w', ARRAY[1::bigint], ARRAY['e'], ARRAY[true]),
                          jobs.heartbeat_many(ARRAY[1::bigint], 'w', ARRAY[1::bigint]),
                          jobs.snooze(1, 'w', 1, '1 minute'), jobs.progress(1, 'w', 1, '{}'),
                          jobs.complete(job_id => 1, worker => 'w', lease_version => 1, result => '{}') $$,
                'style: the token-less calls of the first release resolve, by position and by name');
DEALLOCATE tokenless;
SELECT has_function('jobs', 'reap', ARRAY['integer'], 'style: jobs.reap(integer) exists');
SELECT has_function('jobs', 'cancel', ARRAY['bigint','text'], 'style: jobs.cancel(bigint, text) exists');
SELECT has_function('jobs', 'replay', ARRAY['bigint'], 'style: jobs.replay(bigint) exists');
SELECT has_function('jobs', 'stale_queued', ARRAY['text','interval','integer'], 'style: jobs.stale_queued(text, interval, integer) exists');
SELECT has_function('jobs', 'prune', ARRAY['interval', 'integer'], 'style: jobs.prune(interval, integer) exists');
SELECT has_function('jobs', 'get', ARRAY['bigint'], 'style: jobs.get(bigint) exists');
SELECT has_function('jobs', 'events', ARRAY['bigint'], 'style: jobs.events(bigint) exists');
SELECT has_function('jobs', 'children', ARRAY['bigint'], 'style: jobs.children(bigint) exists');

-- return types as in docs/design.md §4.
SELECT function_returns('jobs', 'define_type', ARRAY['text','text','interval','interval','integer','interval','interval','integer','interval','numeric','numeric','bigint','interval','numeric','integer','integer','integer','interval','text','integer'], 'jobs.job_type', 'style: define_type returns jobs.job_type');
SELECT function_returns('jobs', 'submit', ARRAY['text','jsonb','text','timestamp with time zone','text','boolean','integer','jobs.status[]','interval','text','text','bigint[]','text','text'], 'jobs.job', 'style: submit returns jobs.job');
SELECT function_returns('jobs', 'submit_many', ARRAY['jsonb'], 'setof jobs.job', 'style: submit_many returns SETOF jobs.job');
SELECT function_returns('jobs', 'fan_out', ARRAY['jsonb','jsonb'], 'jobs.job', 'style: fan_out returns jobs.job (the coordinator)');
SELECT function_returns('jobs', 'mark_enqueue_failed', ARRAY['bigint[]'], 'integer', 'style: mark_enqueue_failed returns integer');
SELECT function_returns('jobs', 'recover_enqueue_failed', ARRAY['integer'], 'setof jobs.signal', 'style: recover_enqueue_failed returns SETOF jobs.signal');
SELECT function_returns('jobs', 'claim', ARRAY['bigint','text','text[]'], 'setof jobs.lease', 'style: claim returns SETOF jobs.lease');
SELECT function_returns('jobs', 'claim_many', ARRAY['bigint[]','text','text[]'], 'setof jobs.lease', 'style: claim_many returns SETOF jobs.lease');
SELECT function_returns('jobs', 'claim_next', ARRAY['text','text[]','integer'], 'setof jobs.lease', 'style: claim_next returns SETOF jobs.lease');
SELECT function_returns('jobs', 'heartbeat', ARRAY['bigint','text','bigint','uuid'], 'jobs.heartbeat', 'style: heartbeat returns jobs.heartbeat');
SELECT function_returns('jobs', 'complete', ARRAY['bigint','text','bigint','jsonb','uuid'], 'jobs.outcome', 'style: complete returns jobs.outcome');
SELECT function_returns('jobs', 'complete_many', ARRAY['bigint[]','text','bigint[]','jsonb[]','uuid[]'], 'setof jobs.outcome', 'style: complete_many returns SETOF jobs.outcome');
SELECT function_returns('jobs', 'fail', ARRAY['bigint','text','bigint','text','boolean','uuid'], 'jobs.outcome', 'style: fail returns jobs.outcome');
SELECT function_returns('jobs', 'reap', ARRAY['integer'], 'setof jobs.signal', 'style: reap returns SETOF jobs.signal');
SELECT function_returns('jobs', 'cancel', ARRAY['bigint','text'], 'jobs.outcome', 'style: cancel returns jobs.outcome');
SELECT function_returns('jobs', 'replay', ARRAY['bigint'], 'boolean', 'style: replay returns boolean');
SELECT function_returns('jobs', 'stale_queued', ARRAY['text','interval','integer'], 'setof jobs.signal', 'style: stale_queued returns SETOF jobs.signal');
SELECT function_returns('jobs', 'prune', ARRAY['interval', 'integer'], 'bigint', 'style: prune returns bigint');
SELECT function_returns('jobs', 'get', ARRAY['bigint'], 'jobs.job', 'style: get returns jobs.job');
SELECT function_returns('jobs', 'events', ARRAY['bigint'], 'setof jobs.event', 'style: events returns SETOF jobs.event');
SELECT function_returns('jobs', 'children', ARRAY['bigint'], 'setof jobs.job', 'style: children returns SETOF jobs.job');

-- plain parameter names (named notation reads well), as in docs/design.md §4.
SELECT is_empty($$ SELECT e.signature, p.proargnames
                     FROM expected_fn AS e
                     LEFT JOIN pg_proc AS p ON p.oid = to_regprocedure(e.signature)
                    WHERE e.public AND p.proargnames IS DISTINCT FROM e.argnames $$,
                'style: every public function has the contract''s parameter names in order');

-- defaults the contract names (omitted arguments).
SELECT is((SELECT pronargdefaults FROM pg_proc WHERE oid = to_regprocedure('jobs.submit(text,jsonb,text,timestamp with time zone,text,boolean,integer,jobs.status[],interval,text,text,bigint[],text,text)')),
          13::smallint, 'style: submit has defaults for everything but kind');
SELECT is((SELECT pronargdefaults FROM pg_proc WHERE oid = to_regprocedure('jobs.define_type(text,text,interval,interval,integer,interval,interval,integer,interval,numeric,numeric,bigint,interval,numeric,integer,integer,integer,interval,text,integer)')),
          19::smallint, 'style: define_type has defaults for everything but kind');
SELECT is((SELECT pronargdefaults FROM pg_proc WHERE oid = to_regprocedure('jobs.claim_next(text,text[],integer)')),
          2::smallint, 'style: claim_next defaults queues and max_jobs');
SELECT is((SELECT pronargdefaults FROM pg_proc WHERE oid = to_regprocedure('jobs.stale_queued(text,interval,integer)')),
          2::smallint, 'style: stale_queued defaults older_than and max_jobs');

-- the status enum.
SELECT has_enum('jobs', 'status', 'style: enum jobs.status exists');
SELECT enum_has_labels('jobs', 'status', ARRAY['queued', 'processing', 'done', 'failed', 'enqueue_failed'],
                       'style: jobs.status has exactly queued, processing, done, failed, enqueue_failed in that order');

-- the verdict enum: how a lease ends, typed, so no misspelt verdict becomes a retry; and
-- finish_leases has no default caller (the reaper's bypass is asked for by name).
SELECT enum_has_labels('jobs', 'verdict', ARRAY['done', 'retry', 'fatal', 'snooze', 'expired', 'timeout'],
                       'style: jobs.verdict has exactly done, retry, fatal, snooze, expired, timeout in that order');
SELECT is((SELECT pronargdefaults FROM pg_proc
            WHERE oid = 'jobs.finish_leases(bigint[],text[],bigint[],jobs.verdict[],jsonb[],text[],uuid[],text,interval[])'::regprocedure),
          1::smallint, 'style: finish_leases defaults only its delays: every caller names itself');
SELECT is_empty($$ SELECT p.oid::regprocedure::text FROM pg_proc AS p
                    WHERE p.pronamespace = 'jobs'::regnamespace AND p.proname IN ('finish_leases', 'finish_lease')
                      AND NOT (p.proargtypes::oid[] && ARRAY['jobs.verdict'::regtype::oid, 'jobs.verdict[]'::regtype::oid]) $$,
                'style: no form of finish_leases or finish_lease takes its verdicts as text');

-- composite types, attributes by name and type in order.
CREATE TEMP VIEW type_attrs AS
SELECT t.oid::regtype::text AS type_name,
       array_agg(a.attname::text || ' ' || format_type(a.atttypid, a.atttypmod) ORDER BY a.attnum) AS attrs
  FROM pg_type AS t
  JOIN pg_attribute AS a ON a.attrelid = t.typrelid AND a.attnum > 0 AND NOT a.attisdropped
 WHERE t.typnamespace = 'jobs'::regnamespace AND t.typtype = 'c'
   -- a partition's row type is its parent's, not a type of the contract
   AND NOT EXISTS (SELECT 1 FROM pg_class AS pc WHERE pc.oid = t.typrelid AND pc.relispartition)
 GROUP BY t.oid;
SELECT is((SELECT attrs FROM type_attrs WHERE type_name = 'jobs.lease'),
          ARRAY['job_id bigint', 'lease_version bigint', 'kind text', 'queue text', 'payload jsonb', 'attempt integer',
                'lease_expires_at timestamp with time zone', 'timeout_at timestamp with time zone'],
          'style: jobs.lease is (job_id, lease_version, kind, queue, payload, attempt, lease_expires_at, timeout_at)');
SELECT is((SELECT attrs FROM type_attrs WHERE type_name = 'jobs.outcome'),
          ARRAY['job_id bigint', 'accepted boolean', 'status jobs.status', 'run_after timestamp with time zone', 'wake bigint[]'],
          'style: jobs.outcome is (job_id, accepted, status, run_after, wake bigint[])');
SELECT is((SELECT attrs FROM type_attrs WHERE type_name = 'jobs.signal'),
          ARRAY['job_id bigint', 'queue text', 'run_after timestamp with time zone', 'priority smallint'],
          'style: jobs.signal is (job_id, queue, run_after, priority)');
SELECT is((SELECT attrs FROM type_attrs WHERE type_name = 'jobs.heartbeat'),
          ARRAY['alive boolean', 'cancel_requested boolean', 'lease_expires_at timestamp with time zone'],
          'style: jobs.heartbeat is (alive, cancel_requested, lease_expires_at)');
SELECT is((SELECT attrs FROM type_attrs WHERE type_name = 'jobs.lease_grant'),
          ARRAY['job_id bigint', 'lease_version bigint', 'kind text', 'queue text', 'payload jsonb', 'attempt integer',
                'lease_expires_at timestamp with time zone', 'timeout_at timestamp with time zone', 'token uuid'],
          'style: jobs.lease_grant is jobs.lease''s attributes followed by token uuid');
SELECT set_eq($$ SELECT type_name FROM type_attrs
                  WHERE type_name NOT IN ('jobs.job', 'jobs.job_type', 'jobs.event', 'jobs.history', 'jobs.claimable',
                                          'jobs.metric_minute', 'jobs.queue_depth', 'jobs.lease_policy', 'jobs.producer_policy', 'jobs.schedule',
                                          'jobs.queue_pause', 'jobs.queue_pause_log', 'jobs.kind_limit', 'jobs.kind_slot',
                                          'jobs.event_retention', 'jobs.redis_settings', 'jobs.page', 'jobs.job_dependency', 'jobs.relay_feed', 'jobs.live_slot') $$,
              ARRAY['jobs.lease', 'jobs.outcome', 'jobs.signal', 'jobs.heartbeat', 'jobs.lease_grant'],
              'style: the standalone composite types are exactly lease, outcome, signal, heartbeat and lease_grant');

-- the tables carry the contract's columns (docs/design.md §3).
SELECT columns_are('jobs', 'event',
    ARRAY['id', 'job_id', 'at', 'from_status', 'to_status', 'lease_version', 'worker', 'session_role', 'reason', 'error'],
    'style: jobs.event has exactly the contract''s columns');
SELECT columns_are('jobs', 'history',
    ARRAY['id', 'job_id', 'at', 'from_status', 'to_status', 'lease_version', 'worker', 'session_role', 'reason', 'error'],
    'style: jobs.history has jobs.event''s columns (a history reads as one table)');
SELECT is_empty($$ SELECT c FROM unnest(ARRAY['id', 'kind', 'queue', 'payload', 'status', 'result', 'error', 'created_at',
                      'updated_at', 'claimed_at', 'finished_at', 'owned_by', 'lease_version', 'retry_count', 'max_retries',
                      'run_after', 'lease_expires_at', 'idempotency_key', 'ordering_key', 'parent_id', 'pending_children',
                      'cancel_requested_at']) AS c
                    WHERE NOT EXISTS (SELECT 1 FROM pg_attribute AS a
                                       WHERE a.attrelid = 'jobs.job'::regclass AND a.attname = c AND NOT a.attisdropped) $$,
                'style: jobs.job has every column the contract lists');
SELECT col_type_is('jobs', 'job', 'id', 'bigint', 'style: jobs.job.id is bigint');
SELECT col_type_is('jobs', 'job', 'status', 'jobs.status', 'style: jobs.job.status is jobs.status');
SELECT col_type_is('jobs', 'job', 'lease_version', 'bigint', 'style: jobs.job.lease_version is bigint');
SELECT col_type_is('jobs', 'job', 'payload', 'jsonb', 'style: jobs.job.payload is jsonb');
SELECT col_type_is('jobs', 'job', 'run_after', 'timestamp with time zone', 'style: jobs.job.run_after is timestamptz');
SELECT columns_are('jobs', 'job_type',
    ARRAY['kind', 'queue', 'lease_timeout', 'timeout', 'max_retries', 'backoff_base', 'backoff_max', 'max_payload_bytes',
          'slo_latency', 'slo_target', 'slo_success', 'max_backlog', 'run_time_budget', 'max_failure_rate',
          'priority', 'max_running', 'rate_limit', 'rate_period', 'on_dead', 'max_running_per_key', 'created_at', 'updated_at'],
    'style: jobs.job_type has the definition columns (plus created_at/updated_at)');

-- the roles.
SELECT is((SELECT count(*) FROM pg_roles WHERE rolname IN ('jobs_producer', 'jobs_worker', 'jobs_admin') AND NOT rolcanlogin),
          3::bigint, 'style: jobs_producer, jobs_worker and jobs_admin exist and are NOLOGIN');
SELECT is_empty($$ SELECT r.rolname FROM pg_roles AS r
                    WHERE r.rolname IN ('jobs_producer', 'jobs_worker', 'jobs_admin')
                      AND (r.rolsuper OR r.rolcreaterole OR r.rolcreatedb OR r.rolbypassrls) $$,
                'style: the jobs_* roles carry no superuser, createrole, createdb or bypassrls attribute');
SELECT schema_privs_are('jobs', 'public', ARRAY[]::text[], 'style: PUBLIC has no privilege on schema jobs');

-- One door per transition (docs/sql-api.md, "Who writes a transition"): only the doors write
-- jobs.event or change jobs.job.status (directly or through the view jobs.claimable), and
-- only insert_job_rows (jobs.insert_jobs' array form) creates jobs.
SELECT set_eq($$ SELECT p.proname::text FROM pg_catalog.pg_proc AS p
                  WHERE p.pronamespace = 'jobs'::regnamespace
                    AND p.prosrc ~* 'INSERT\s+INTO\s+jobs\.event\M' $$,
              ARRAY['cancel', 'end_unheld', 'finish_leases', 'insert_job_rows',
                    'mark_enqueue_failed', 'recover_enqueue_failed', 'release_dependents', 'requeue_failed'],
              'style: only the transition doors (cancel''s cancel_requested flag and release_dependents'' released mark too) write jobs.event (a claim is the job row''s until a row of its lease is written)');
SELECT set_eq($$ SELECT p.proname::text FROM pg_catalog.pg_proc AS p
                  WHERE p.pronamespace = 'jobs'::regnamespace
                    AND p.prosrc ~* 'UPDATE\s+jobs\.(job|claimable)\M[^;]*?\mSET\s((?!\m(WHERE|FROM|RETURNING)\M)[^;])*\mstatus\s*=' $$,
              ARRAY['end_unheld', 'finish_leases', 'grant_leases', 'mark_enqueue_failed',
                    'recover_enqueue_failed', 'requeue_failed'],
              'style: only the transition doors change jobs.job.status');
SELECT set_eq($$ SELECT p.proname::text FROM pg_catalog.pg_proc AS p
                  WHERE p.pronamespace = 'jobs'::regnamespace
                    AND p.prosrc ~* '(INSERT\s+INTO|COPY)\s+jobs\.job\M' $$,
              ARRAY['insert_job_rows'], 'style: only insert_job_rows creates jobs');

SELECT * FROM finish();
ROLLBACK;
