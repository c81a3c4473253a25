-- pgTAP tests for leases bound to their caller: the session role that claimed a lease is the
-- only one whose heartbeat, complete and fail are accepted (jobs.lease_policy, switched by
-- jobs.configure_leases), lease tokens from claim_*_with_token are checked when given and
-- when required, JB001 tells a stranger nothing about the lease and tells anyone how a lease
-- nobody holds ended, events record the session role, no read path shows a token, and outcome
-- sizes are capped.
BEGIN;
SELECT plan(95);
\ir helpers/lease_helpers.psql

-- Two login roles of the worker kind: worker A and worker B (rolled back with the test).
CREATE ROLE lb_worker_a LOGIN;
CREATE ROLE lb_worker_b LOGIN;
GRANT jobs_worker TO lb_worker_a, lb_worker_b;
CREATE TEMP TABLE tok (name text PRIMARY KEY, token uuid NOT NULL);
GRANT ALL ON ids, snap, tok TO PUBLIC;
-- the message of the error a statement raises (run as the current session role)
CREATE FUNCTION pg_temp.message_of(text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE msg text;
BEGIN
    EXECUTE $1;
    RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS msg = MESSAGE_TEXT;
    RETURN msg;
END $$;
CREATE FUNCTION pg_temp.tok(text) RETURNS uuid LANGUAGE sql STABLE
    AS $$ SELECT t.token FROM tok AS t WHERE t.name = $1 $$;

SELECT jobs.define_type('lb.t', max_retries => 3);
SELECT pg_temp.job(n, 'lb.t') FROM unnest(ARRAY['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h']) AS n;

SELECT results_eq($$ SELECT session_role_bound, lease_token_required FROM jobs.configure_leases() $$,
                  $$ VALUES (true, false) $$, 'lease_policy: by default bound to the session role, token not required');

-- worker A claims a and b.
SET SESSION AUTHORIZATION lb_worker_a;
SELECT is((SELECT count(*) FROM jobs.claim_many(ARRAY[pg_temp.id('a'), pg_temp.id('b')], 'host-a:1')), 2::bigint,
          'claim: worker A claims two jobs');
RESET SESSION AUTHORIZATION;
SELECT is((SELECT claim_role FROM jobs.job WHERE id = pg_temp.id('a')), 'lb_worker_a'::regrole,
          'claim: the job records the claiming session role');
SELECT is((SELECT session_role FROM jobs.history WHERE job_id = pg_temp.id('a') AND reason = 'claimed'), 'lb_worker_a'::regrole,
          'claim: the claimed event records the session role');

-- worker B forges A's writes with A's worker name and lease_version (as read from jobs.get).
SELECT pg_temp.snap(pg_temp.id('a'));
SET SESSION AUTHORIZATION lb_worker_b;
SELECT is((jobs.get(pg_temp.id('a'))).owned_by, 'host-a:1', 'forgery: worker B can read the owner and lease_version with get');
SELECT throws_ok($$ SELECT jobs.complete(pg_temp.id('a'), 'host-a:1', 1, '{"forged": true}') $$, 'JB001', NULL,
                 'forgery: B completing A''s lease with A''s name and lease_version -> JB001');
SELECT throws_ok($$ SELECT jobs.fail(pg_temp.id('a'), 'host-a:1', 1, 'forged', false) $$, 'JB001', NULL,
                 'forgery: B failing A''s lease -> JB001');
SELECT throws_ok($$ SELECT jobs.heartbeat(pg_temp.id('a'), 'host-a:1', 1) $$, 'JB001', NULL,
                 'forgery: B heartbeating A''s lease -> JB001');
SELECT is((SELECT accepted FROM jobs.complete_many(ARRAY[pg_temp.id('a')], 'host-a:1', ARRAY[1::bigint], ARRAY['{"forged": true}'::jsonb])),
          false, 'forgery: B in complete_many -> accepted = false');
SELECT is((SELECT accepted FROM jobs.fail_many(ARRAY[pg_temp.id('a')], 'host-a:1', ARRAY[1::bigint], ARRAY['forged'], ARRAY[false])),
          false, 'forgery: B in fail_many -> accepted = false');
SELECT is((SELECT held FROM jobs.heartbeat_many(ARRAY[pg_temp.id('a')], 'host-a:1', ARRAY[1::bigint])),
          false, 'forgery: B in heartbeat_many -> held = false');
-- What a stranger is told: nothing about who holds the lease or at which version.
SELECT ok(position('host-a:1' IN pg_temp.message_of($$ SELECT jobs.complete(pg_temp.id('a'), 'host-b:2', 7) $$)) = 0
          AND position('lease_version 1' IN pg_temp.message_of($$ SELECT jobs.complete(pg_temp.id('a'), 'host-b:2', 7) $$)) = 0,
          'JB001 to another role: the message names neither the owner nor the current lease_version');
SELECT ok(position('host-a:1' IN pg_temp.message_of($$ SELECT jobs.heartbeat(pg_temp.id('a'), 'host-b:2', 7) $$)) = 0,
          'JB001 to another role: heartbeat''s message does not name the owner either');
SELECT matches(pg_temp.message_of($$ SELECT jobs.fail(pg_temp.id('a'), 'host-b:2', 7, 'x') $$),
               '^jobs\.fail: lease lost on job \d+ \(you: worker host-b:2, lease_version 7\)',
               'JB001 to another role: the message starts with the function and says what the caller sent');
RESET SESSION AUTHORIZATION;
SELECT is(pg_temp.state(pg_temp.id('a')), pg_temp.snapped(pg_temp.id('a')), 'forgery: every refused write changed nothing');

-- The claimant itself still learns the current lease on a stale write.
SET SESSION AUTHORIZATION lb_worker_a;
SELECT matches(pg_temp.message_of($$ SELECT jobs.complete(pg_temp.id('a'), 'host-a:1', 0) $$),
               'now: status processing, owned_by host-a:1, lease_version 1',
               'JB001 to the claiming role: the message says who holds the job and at which lease_version');
SELECT is((jobs.heartbeat(pg_temp.id('a'), 'host-a:1', 1)).alive, true, 'binding: A heartbeats its own lease');
SELECT is((jobs.complete(pg_temp.id('a'), 'host-a:1', 1, '{"by": "a"}')).accepted, true, 'binding: A completes its own lease');
RESET SESSION AUTHORIZATION;
SELECT is((SELECT session_role FROM jobs.history WHERE job_id = pg_temp.id('a') AND reason = 'completed'), 'lb_worker_a'::regrole,
          'events: the completion records the session role');
SELECT is((SELECT session_role FROM jobs.events(pg_temp.id('a')) WHERE reason = 'completed'), 'lb_worker_a'::regrole,
          'events: jobs.events shows the session role');

-- Binding off: a shared-role deployment. B's write is accepted, still fenced by lease_version.
SELECT results_eq($$ SELECT session_role_bound FROM jobs.configure_leases(bind_session_role => false) $$,
                  $$ VALUES (false) $$, 'configure_leases: binding switched off');
SELECT pg_temp.snap(pg_temp.id('b'));
SET SESSION AUTHORIZATION lb_worker_b;
SELECT throws_ok($$ SELECT jobs.complete(pg_temp.id('b'), 'host-a:1', 2, '{"by": "b"}') $$, 'JB001', NULL,
                 'binding off: a stale lease_version is still refused (JB001)');
RESET SESSION AUTHORIZATION;
SELECT is(pg_temp.state(pg_temp.id('b')), pg_temp.snapped(pg_temp.id('b')), 'binding off: the refused write changed nothing');
SET SESSION AUTHORIZATION lb_worker_b;
SELECT is((jobs.heartbeat(pg_temp.id('b'), 'host-a:1', 1)).alive, true, 'binding off: another role may heartbeat the lease');
SELECT is((jobs.complete(pg_temp.id('b'), 'host-a:1', 1, '{"by": "b"}')).accepted, true,
          'binding off: another role may complete with the worker name and lease_version');
RESET SESSION AUTHORIZATION;
SELECT is((SELECT session_role FROM jobs.history WHERE job_id = pg_temp.id('b') AND reason = 'completed'), 'lb_worker_b'::regrole,
          'events: the completion records who really wrote it, whatever worker name it gave');
SELECT results_eq($$ SELECT e.reason, e.session_role::text FROM jobs.event AS e WHERE e.job_id = pg_temp.id('b') ORDER BY e.id $$,
                  $$ VALUES ('claimed', 'lb_worker_a'), ('completed', 'lb_worker_b') $$,
                  'binding off: a completion by another role is a row of jobs.event, after its claim''s (the job row keeps the claimant''s role only)');
SELECT jobs.configure_leases(bind_session_role => true);

-- Lease tokens: handed out by the *_with_token claims, checked when given.
SET SESSION AUTHORIZATION lb_worker_a;
INSERT INTO tok SELECT 'c', g.token FROM jobs.claim_with_token(pg_temp.id('c'), 'host-a:1') AS g;
INSERT INTO tok SELECT CASE WHEN g.job_id = pg_temp.id('d') THEN 'd' ELSE 'e' END, g.token
  FROM jobs.claim_many_with_token(ARRAY[pg_temp.id('d'), pg_temp.id('e')], 'host-a:1') AS g;
INSERT INTO tok SELECT 'f', g.token FROM jobs.claim_next_with_token('host-a:1', ARRAY['default'], 1) AS g;
RESET SESSION AUTHORIZATION;
SELECT is((SELECT count(DISTINCT token) FROM tok), 4::bigint, 'tokens: every claim form hands out a token, one per lease');
SELECT is((SELECT id FROM ids WHERE name = 'f'), (SELECT id FROM ids AS i JOIN jobs.job AS j USING (id)
                                                   WHERE j.status = 'processing' AND i.name = 'f'),
          'tokens: claim_next_with_token claimed the oldest due job');
SELECT pg_temp.snap(pg_temp.id('c'));
SET SESSION AUTHORIZATION lb_worker_a;
SELECT throws_ok($$ SELECT jobs.complete(pg_temp.id('c'), 'host-a:1', 1, '{}', gen_random_uuid()) $$, 'JB001', NULL,
                 'tokens: complete with a wrong token -> JB001');
SELECT throws_ok($$ SELECT jobs.fail(pg_temp.id('c'), 'host-a:1', 1, 'x', true, pg_temp.tok('d')) $$, 'JB001', NULL,
                 'tokens: fail with another lease''s token -> JB001');
SELECT throws_ok($$ SELECT jobs.heartbeat(pg_temp.id('c'), 'host-a:1', 1, gen_random_uuid()) $$, 'JB001', NULL,
                 'tokens: heartbeat with a wrong token -> JB001');
SELECT is((SELECT accepted FROM jobs.complete_many(ARRAY[pg_temp.id('c')], 'host-a:1', ARRAY[1::bigint], NULL, ARRAY[gen_random_uuid()])),
          false, 'tokens: complete_many with a wrong token -> accepted = false');
SELECT is((SELECT accepted FROM jobs.fail_many(ARRAY[pg_temp.id('c')], 'host-a:1', ARRAY[1::bigint], ARRAY['x'], ARRAY[true], ARRAY[gen_random_uuid()])),
          false, 'tokens: fail_many with a wrong token -> accepted = false');
SELECT is((SELECT held FROM jobs.heartbeat_many(ARRAY[pg_temp.id('c')], 'host-a:1', ARRAY[1::bigint], ARRAY[gen_random_uuid()])),
          false, 'tokens: heartbeat_many with a wrong token -> held = false');
RESET SESSION AUTHORIZATION;
SELECT is(pg_temp.state(pg_temp.id('c')), pg_temp.snapped(pg_temp.id('c')), 'tokens: every write with a wrong token changed nothing');
-- B holding the right token is still not A: the binding and the token are both checked.
SET SESSION AUTHORIZATION lb_worker_b;
SELECT throws_ok($$ SELECT jobs.complete(pg_temp.id('c'), 'host-a:1', 1, '{}', pg_temp.tok('c')) $$, 'JB001', NULL,
                 'tokens: another role with the right token is still refused while bound');
SET SESSION AUTHORIZATION lb_worker_a;
SELECT is((jobs.heartbeat(pg_temp.id('c'), 'host-a:1', 1, pg_temp.tok('c'))).alive, true, 'tokens: heartbeat with the right token');
SELECT is(ARRAY(SELECT held FROM jobs.heartbeat_many(ARRAY[pg_temp.id('d'), pg_temp.id('e')], 'host-a:1', ARRAY[1, 1]::bigint[],
                                                     ARRAY[pg_temp.tok('d'), pg_temp.tok('d')])),
          ARRAY[true, false], 'tokens: heartbeat_many holds the item with its own token, not the one with another''s');
SELECT is((jobs.complete(pg_temp.id('c'), 'host-a:1', 1, '{"ok": 1}', pg_temp.tok('c'))).accepted, true,
          'tokens: complete with the right token -> accepted');

-- Required tokens: a write without one is refused, whichever form.
RESET SESSION AUTHORIZATION;
SELECT results_eq($$ SELECT lease_token_required FROM jobs.configure_leases(require_lease_token => true) $$,
                  $$ VALUES (true) $$, 'configure_leases: token required');
SELECT pg_temp.snap(pg_temp.id('d'));
SET SESSION AUTHORIZATION lb_worker_a;
SELECT throws_ok($$ SELECT jobs.complete(pg_temp.id('d'), 'host-a:1', 1, '{}') $$, 'JB001', NULL,
                 'required token: complete without it -> JB001');
SELECT throws_ok($$ SELECT jobs.heartbeat(pg_temp.id('d'), 'host-a:1', 1) $$, 'JB001', NULL,
                 'required token: heartbeat without it -> JB001');
SELECT is((SELECT accepted FROM jobs.fail_many(ARRAY[pg_temp.id('d')], 'host-a:1', ARRAY[1::bigint], ARRAY['x'], ARRAY[true])),
          false, 'required token: fail_many without tokens -> accepted = false');
SELECT is((SELECT accepted FROM jobs.complete_many(ARRAY[pg_temp.id('d')], 'host-a:1', ARRAY[1::bigint], NULL, ARRAY[NULL::uuid])),
          false, 'required token: complete_many with a NULL token -> accepted = false');
RESET SESSION AUTHORIZATION;
SELECT is(pg_temp.state(pg_temp.id('d')), pg_temp.snapped(pg_temp.id('d')), 'required token: the refused writes changed nothing');
SET SESSION AUTHORIZATION lb_worker_a;
SELECT is((SELECT accepted FROM jobs.fail_many(ARRAY[pg_temp.id('d')], 'host-a:1', ARRAY[1::bigint], ARRAY['x'], ARRAY[true],
                                               ARRAY[pg_temp.tok('d')])),
          true, 'required token: fail_many with it -> accepted');
RESET SESSION AUTHORIZATION;
SELECT jobs.configure_leases(require_lease_token => false);
-- The reaper takes an expired lease back whatever role claimed it: no token, another role.
SELECT pg_temp.elapse(pg_temp.id('e'), '1 hour');
SELECT ok(pg_temp.id('e') IN (SELECT job_id FROM jobs.reap()), 'reap: an expired lease of another role is reaped');

-- No read path shows a token: nothing per lease is stored.
SELECT is_empty($$ SELECT 1 FROM tok AS t, jobs.job AS j
                    WHERE position(replace(t.token::text, '-', '') IN replace(j::text, '-', '')) > 0 $$,
                'tokens: no job row carries a lease token');
SELECT is_empty($$ SELECT 1 FROM tok AS t, ids AS i, jobs.get(i.id) AS j
                    WHERE position(replace(t.token::text, '-', '') IN replace(j::text, '-', '')) > 0 $$,
                'tokens: jobs.get never shows a lease token');
SELECT is_empty($$ SELECT 1 FROM tok AS t, jobs.list_jobs(max_jobs => 1000) AS j
                    WHERE position(replace(t.token::text, '-', '') IN replace(j::text, '-', '')) > 0 $$,
                'tokens: jobs.list_jobs never shows a lease token');
SELECT is_empty($$ SELECT 1 FROM tok AS t, ids AS i, jobs.events(i.id) AS e
                    WHERE position(replace(t.token::text, '-', '') IN replace(e::text, '-', '')) > 0 $$,
                'tokens: jobs.events never shows a lease token');
SET SESSION AUTHORIZATION lb_worker_b;
SELECT throws_ok($$ SELECT * FROM jobs.lease_policy $$, '42501', NULL, 'tokens: a worker cannot read the token key');
SELECT throws_ok($$ SELECT jobs.lease_tokens(ARRAY[1::bigint], ARRAY[1::bigint]) $$, '42501', NULL,
                 'tokens: a worker cannot compute tokens');
SELECT throws_ok($$ SELECT * FROM jobs.configure_leases(bind_session_role => false) $$, '42501', NULL,
                 'configure_leases: a worker cannot switch the binding off');
RESET SESSION AUTHORIZATION;

-- Bad input to the token forms: 22023, as for the forms without a token.
SELECT is_empty($$ SELECT * FROM jobs.claim_with_token(pg_temp.id('c'), 'host-a:1') $$,
                'claim_with_token: a job that is not claimable -> zero rows');
SELECT throws_ok($$ SELECT * FROM jobs.claim_many_with_token(NULL, 'host-a:1') $$, '22023', NULL,
                 'claim_many_with_token: NULL ids -> 22023');
SELECT throws_ok($$ SELECT * FROM jobs.complete_many(ARRAY[1, 2]::bigint[], 'host-a:1', ARRAY[1, 1]::bigint[], NULL, ARRAY[gen_random_uuid()]) $$,
                 '22023', NULL, 'complete_many: fewer tokens than items -> 22023');
SELECT results_eq($$ SELECT * FROM jobs.heartbeat_many(ARRAY[1]::bigint[], 'host-a:1', ARRAY[1]::bigint[], NULL) $$,
                  $$ SELECT * FROM jobs.heartbeat_many(ARRAY[1]::bigint[], 'host-a:1', ARRAY[1]::bigint[]) $$,
                  'heartbeat_many: NULL tokens are no tokens: the form without them (which delegates here)');

-- Caps: a result over 1 MiB of JSON text or an error over 64 KiB is refused, nothing written.
SET SESSION AUTHORIZATION lb_worker_a;
SELECT is(count(*), 2::bigint, 'caps: A claims two more jobs') FROM jobs.claim_many(ARRAY[pg_temp.id('g'), pg_temp.id('h')], 'host-a:1');
RESET SESSION AUTHORIZATION;
SELECT pg_temp.snap(pg_temp.id('g'));
SELECT pg_temp.snap(pg_temp.id('h'));
SET SESSION AUTHORIZATION lb_worker_a;
SELECT throws_like($$ SELECT jobs.complete(pg_temp.id('g'), 'host-a:1', 1, to_jsonb(repeat('x', 1048575))) $$,
                   'jobs.complete: item 0: the result (as JSON text) is 1048577 bytes, over the limit of 1048576%',
                   'caps: complete with a result one byte over 1 MiB -> 22023 naming the size');
SELECT is(pg_temp.error_of($$ SELECT * FROM jobs.complete_many(ARRAY[pg_temp.id('g'), pg_temp.id('h')], 'host-a:1', ARRAY[1, 1]::bigint[],
                                                               ARRAY['{}'::jsonb, to_jsonb(repeat('x', 1048575))]) $$),
          '22023 jobs.complete_many hint=true', 'caps: complete_many with one result over 1 MiB -> 22023');
SELECT throws_like($$ SELECT jobs.fail(pg_temp.id('g'), 'host-a:1', 1, repeat('e', 65537)) $$,
                   'jobs.fail: item 0: the error is 65537 bytes, over the limit of 65536%',
                   'caps: fail with an error over 64 KiB -> 22023 naming the size');
SELECT is(pg_temp.error_of($$ SELECT * FROM jobs.fail_many(ARRAY[pg_temp.id('g'), pg_temp.id('h')], 'host-a:1', ARRAY[1, 1]::bigint[],
                                                           ARRAY['x', repeat('e', 65537)], ARRAY[true, true], ARRAY[NULL, NULL]::uuid[]) $$),
          '22023 jobs.fail_many hint=true', 'caps: fail_many (token form) with one error over 64 KiB -> 22023');
RESET SESSION AUTHORIZATION;
SELECT is(pg_temp.state(pg_temp.id('g')) || pg_temp.state(pg_temp.id('h')),
          pg_temp.snapped(pg_temp.id('g')) || pg_temp.snapped(pg_temp.id('h')), 'caps: the refused calls changed nothing');
SET SESSION AUTHORIZATION lb_worker_a;
SELECT is((jobs.complete(pg_temp.id('g'), 'host-a:1', 1, to_jsonb(repeat('x', 1048574)))).accepted, true,
          'caps: a result of exactly 1 MiB of JSON text is accepted');
SELECT is((jobs.fail(pg_temp.id('h'), 'host-a:1', 1, repeat('e', 65536))).accepted, true,
          'caps: an error of exactly 64 KiB is accepted');
RESET SESSION AUTHORIZATION;

-- What JB001 says about a lease nobody holds any more: how it ended, read from the job's
-- history, since ending a lease clears claim_role (but for done) and the role wording would
-- blame a role that did hold it. The role wording stays for a lease another role holds now.
SELECT jobs.define_type('lb.ended', lease_timeout => '5 seconds', max_retries => 1);
SELECT pg_temp.job(n, 'lb.ended') FROM unnest(ARRAY['r', 'q', 'x', 'y', 'z']) AS n;
SET SESSION AUTHORIZATION lb_worker_a;
SELECT is((SELECT lease_version FROM jobs.claim(pg_temp.id('r'), 'w1')), 1::bigint, 'ended lease: A claims r');
RESET SESSION AUTHORIZATION;
SELECT pg_temp.elapse(pg_temp.id('r'), '6 seconds');
SELECT ok(pg_temp.id('r') IN (SELECT job_id FROM jobs.reap()), 'ended lease: the reaper takes r back once, queued again');
SET SESSION AUTHORIZATION lb_worker_a;
SELECT is((SELECT lease_version FROM jobs.claim(pg_temp.id('r'), 'w1')), 3::bigint, 'ended lease: A claims r again');
RESET SESSION AUTHORIZATION;
SELECT pg_temp.elapse(pg_temp.id('r'), '6 seconds');
SELECT is((SELECT count(*) FROM jobs.reap() WHERE job_id = pg_temp.id('r')), 0::bigint, 'ended lease: the reaper takes r back twice');
SELECT is((SELECT (status, lease_version, claim_role IS NULL)::text FROM jobs.job WHERE id = pg_temp.id('r')), '(failed,3,t)',
          'ended lease: r is failed (exhausted) at lease_version 3, claimed by no role');
SET SESSION AUTHORIZATION lb_worker_a;
SELECT throws_ok($$ SELECT jobs.complete(pg_temp.id('r'), 'w1', 3, '{}') $$, 'JB001',
                 format('jobs.complete: lease lost on job %s (you: worker w1, lease_version 3): that lease ended, the reaper took it back (lease expired, reason exhausted); the job is now failed, lease_version 3',
                        pg_temp.id('r')),
                 'ended lease: the former holder''s complete after the reaper failed the job -> JB001 saying the reaper took it back');
SELECT throws_like($$ SELECT jobs.heartbeat(pg_temp.id('r'), 'w1', 3) $$,
                   'jobs.heartbeat: lease lost on job % (you: worker w1, lease_version 3): that lease ended, the reaper took it back (lease expired, reason exhausted); the job is now failed, lease_version 3',
                   'ended lease: the former holder''s heartbeat says the same');
SELECT throws_like($$ SELECT jobs.complete(pg_temp.id('r'), 'w1', 1, '{}', gen_random_uuid()) $$,
                   'jobs.complete: lease lost on job % (you: worker w1, lease_version 1): that lease ended, the reaper took it back (lease expired, reason reaped); the job is now failed, lease_version 3',
                   'ended lease: an earlier lease the reaper requeued, with a token -> JB001 naming reason reaped');
SELECT throws_like($$ SELECT jobs.fail(pg_temp.id('r'), 'w1', 2, 'x') $$,
                   'jobs.fail: lease lost on job % (you: worker w1, lease_version 2): the job was never claimed at that lease_version; it is now failed, lease_version 3',
                   'ended lease: a lease_version between two claims -> JB001 saying it was never claimed');
-- A queued job nobody ever claimed.
SELECT throws_ok($$ SELECT jobs.fail(pg_temp.id('q'), 'w1', 0, 'x') $$, 'JB001',
                 format('jobs.fail: lease lost on job %s (you: worker w1, lease_version 0): the job was never claimed at that lease_version; it is now queued, lease_version 0',
                        pg_temp.id('q')),
                 'never claimed: fail on a queued job -> JB001 saying it was never claimed, not naming a role');
SELECT throws_like($$ SELECT jobs.snooze(pg_temp.id('q'), 'w1', 1, '1 minute') $$,
                   'jobs.snooze: lease lost on job % (you: worker w1, lease_version 1): the job was never claimed at that lease_version; it is now queued, lease_version 0',
                   'never claimed: snooze says the same');
SELECT throws_like($$ SELECT jobs.progress(pg_temp.id('q'), 'w1', 1, '{"done": 1}') $$,
                   'jobs.progress: lease lost on job % (you: worker w1, lease_version 1): the job was never claimed at that lease_version; it is now queued, lease_version 0',
                   'never claimed: progress says the same');
-- A lease another role holds now: the role wording, and nothing about the holder.
SELECT is((SELECT lease_version FROM jobs.claim(pg_temp.id('x'), 'w1')), 1::bigint, 'held: A claims x');
SET SESSION AUTHORIZATION lb_worker_b;
SELECT throws_ok($$ SELECT jobs.complete(pg_temp.id('x'), 'w1', 1, '{}') $$, 'JB001',
                 format('jobs.complete: lease lost on job %s (you: worker w1, lease_version 1): this session''s role does not hold that lease',
                        pg_temp.id('x')),
                 'held: B completing the lease A holds now -> JB001 with the role wording');
SELECT throws_like($$ SELECT jobs.heartbeat(pg_temp.id('x'), 'w1', 1) $$,
                   'jobs.heartbeat: lease lost on job % (you: worker w1, lease_version 1): this session''s role does not hold that lease',
                   'held: B''s heartbeat -> the role wording');
-- A's lease reaped, then claimed by B: the job is held by another role now.
SET SESSION AUTHORIZATION lb_worker_a;
SELECT is((SELECT lease_version FROM jobs.claim(pg_temp.id('y'), 'w1')), 1::bigint, 'held: A claims y');
RESET SESSION AUTHORIZATION;
SELECT pg_temp.elapse(pg_temp.id('y'), '6 seconds');
SELECT ok(pg_temp.id('y') IN (SELECT job_id FROM jobs.reap()), 'held: the reaper takes y back');
SET SESSION AUTHORIZATION lb_worker_b;
SELECT is((SELECT lease_version FROM jobs.claim(pg_temp.id('y'), 'w2')), 3::bigint, 'held: B claims y');
SET SESSION AUTHORIZATION lb_worker_a;
SELECT throws_ok($$ SELECT jobs.complete(pg_temp.id('y'), 'w1', 1, '{}') $$, 'JB001',
                 format('jobs.complete: lease lost on job %s (you: worker w1, lease_version 1): this session''s role does not hold that lease',
                        pg_temp.id('y')),
                 'held: A''s reaped lease, the job now B''s -> JB001 with the role wording, B''s lease untold');
-- A lease its holder ended itself.
SELECT is((SELECT lease_version FROM jobs.claim(pg_temp.id('z'), 'w1')), 1::bigint, 'ended by its holder: A claims z');
SELECT is((jobs.fail(pg_temp.id('z'), 'w1', 1, 'bad input', false)).status, 'failed'::jobs.status, 'ended by its holder: A fails z');
SELECT throws_like($$ SELECT jobs.fail(pg_temp.id('z'), 'w1', 1, 'bad input', false) $$,
                   'jobs.fail: lease lost on job % (you: worker w1, lease_version 1): that lease already ended (reason failed); the job is now failed, lease_version 1',
                   'ended by its holder: a repeated fail -> JB001 saying the lease already ended, not naming a role');
SELECT is((jobs.complete(pg_temp.id('x'), 'w1', 1, '{}')).status, 'done'::jobs.status, 'ended by its holder: A completes x');
SELECT throws_like($$ SELECT jobs.complete(pg_temp.id('x'), 'w1', 1, '{}') $$,
                   'jobs.complete: lease lost on job % (you: worker w1, lease_version 1): that lease already ended, the job is done',
                   'ended by its holder: a repeated complete -> JB001 saying the lease already ended');
RESET SESSION AUTHORIZATION;
-- Another role writing to that lease: x is done, its claim and completion recorded by the job
-- row alone (no jobs.event row to read them from), and told as a completion, not as a lease
-- never granted.
SET SESSION AUTHORIZATION lb_worker_b;
SELECT throws_like($$ SELECT jobs.complete(pg_temp.id('x'), 'w1', 1, '{}') $$,
                   'jobs.complete: lease lost on job % (you: worker w1, lease_version 1): that lease already ended (reason completed); the job is now done, lease_version 1',
                   'ended by its holder: another role''s write to a lease its claimant completed -> JB001 saying it ended in a completion');
RESET SESSION AUTHORIZATION;
-- A lease the reaper ended at the job's execution timeout: taken back too, as reason timed_out.
SELECT jobs.define_type('lb.timed', lease_timeout => '5 seconds', timeout => '5 seconds', max_retries => 2);
SELECT pg_temp.job('t', 'lb.timed');
SET SESSION AUTHORIZATION lb_worker_a;
SELECT is((SELECT lease_version FROM jobs.claim(pg_temp.id('t'), 'w1')), 1::bigint, 'timed out: A claims t');
RESET SESSION AUTHORIZATION;
SELECT pg_temp.elapse(pg_temp.id('t'), '6 seconds');
SELECT ok(pg_temp.id('t') IN (SELECT job_id FROM jobs.reap()), 'timed out: the reaper takes t back at its timeout');
SET SESSION AUTHORIZATION lb_worker_a;
SELECT throws_like($$ SELECT jobs.complete(pg_temp.id('t'), 'w1', 1, '{}') $$,
                   'jobs.complete: lease lost on job % (you: worker w1, lease_version 1): that lease ended, the reaper took it back (timeout after %, reason timed_out); the job is now queued, lease_version 2',
                   'timed out: the former holder''s complete -> JB001 saying the reaper took it back at the timeout');
RESET SESSION AUTHORIZATION;

SELECT * FROM finish();
ROLLBACK;
