-- Producer ownership (jobs.producer_policy): jobs remember the login role that submitted them
-- (jobs.job.submitted_by = session_user); with ownership on, cancel, get and
-- mark_enqueue_failed refuse another role's job as "not found" (JB002) or skip it, and events,
-- children and list_jobs show none of it, except to members of jobs_admin (reads: and
-- jobs_worker). The rule is jobs.own_jobs_only. Off by default, and then nothing is refused.
-- Callers run as real login roles through SET SESSION AUTHORIZATION, so session_user is theirs.
BEGIN;
SELECT plan(56);

CREATE ROLE jobfence_tap_producer_a LOGIN;
CREATE ROLE jobfence_tap_producer_b LOGIN;
CREATE ROLE jobfence_tap_admin LOGIN;
CREATE ROLE jobfence_tap_worker LOGIN;
GRANT jobs_producer TO jobfence_tap_producer_a, jobfence_tap_producer_b;
GRANT jobs_admin TO jobfence_tap_admin;
GRANT jobs_worker TO jobfence_tap_worker;

SELECT jobs.define_type('own_t');
CREATE TEMP TABLE ids (name text PRIMARY KEY, id bigint NOT NULL);
GRANT ALL ON ids TO PUBLIC;
CREATE FUNCTION pg_temp.id(text) RETURNS bigint LANGUAGE sql STABLE
    AS $$ SELECT i.id FROM ids AS i WHERE i.name = $1 $$;
-- the row and its event count as text: equal before and after = nothing written
CREATE FUNCTION pg_temp.state(bigint) RETURNS text LANGUAGE sql STABLE SECURITY DEFINER
    AS $$ SELECT j::text || ' events=' || (SELECT count(*) FROM jobs.history AS e WHERE e.job_id = j.id)
            FROM jobs.job AS j WHERE j.id = $1 $$;
CREATE TEMP TABLE snap (id bigint PRIMARY KEY, r text NOT NULL);
GRANT ALL ON snap TO PUBLIC;
-- 'SQLSTATE function hint=true|false' of a statement, or 'no error'
CREATE FUNCTION pg_temp.error_of(text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE st text; msg text; hint text;
BEGIN
    EXECUTE $1;
    RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, hint = PG_EXCEPTION_HINT;
    RETURN st || ' ' || split_part(msg, ':', 1) || ' hint=' || (coalesce(hint, '') <> '');
END $$;

-- the setting: one row, off, and no caller may change it.
SELECT is((SELECT (count(*), bool_or(ownership))::text FROM jobs.producer_policy), '(1,f)',
          'ownership: jobs.producer_policy holds one row, ownership off by default');
SELECT is_empty($$ SELECT r.rolname, p.priv FROM pg_roles AS r,
                          unnest(ARRAY['SELECT', 'INSERT', 'UPDATE', 'DELETE', 'TRUNCATE']) AS p(priv)
                    WHERE r.rolname IN ('jobs_producer', 'jobs_worker', 'jobs_admin')
                      AND has_table_privilege(r.oid, 'jobs.producer_policy', p.priv) $$,
                'ownership: no jobs_* role holds any privilege on jobs.producer_policy');
SELECT is(current_setting('jobs.producer_ownership', true), NULL,
          'ownership: the setting is no GUC (a session could SET that for itself)');

-- jobs remember who submitted them.
SET SESSION AUTHORIZATION jobfence_tap_producer_a;
INSERT INTO ids SELECT 'a1', (jobs.submit('own_t', '{"n": 1}')).id;
INSERT INTO ids SELECT 'a2', (jobs.submit('own_t', '{"n": 2}')).id;
INSERT INTO ids SELECT 'a3', (jobs.submit('own_t', '{"n": 3}')).id;
INSERT INTO ids SELECT 'a_many', s.id FROM jobs.submit_many('[{"kind": "own_t"}]') AS s;
INSERT INTO ids SELECT 'a_fan', (jobs.fan_out('[{"kind": "own_t"}]', '{"kind": "own_t"}')).id;
SELECT is((jobs.get(pg_temp.id('a1'))).submitted_by, 'jobfence_tap_producer_a'::regrole,
          'ownership: submit records the session''s login role as submitted_by (not the functions'' owner)');
RESET SESSION AUTHORIZATION;
SET SESSION AUTHORIZATION jobfence_tap_producer_b;
INSERT INTO ids SELECT 'b1', (jobs.submit('own_t', '{"n": 4}')).id;
RESET SESSION AUTHORIZATION;
SELECT is((SELECT array_agg(DISTINCT submitted_by::text) FROM jobs.job
            WHERE id IN (pg_temp.id('a_many'), pg_temp.id('a_fan')) OR parent_id = pg_temp.id('a_fan')),
          ARRAY['jobfence_tap_producer_a'], 'ownership: submit_many and fan_out (coordinator and children) record it too');
SELECT is((SELECT submitted_by FROM jobs.job WHERE id = pg_temp.id('b1')), 'jobfence_tap_producer_b'::regrole,
          'ownership: another login role''s job records that role');

-- off (the default): B reads and cancels A's job.
SET SESSION AUTHORIZATION jobfence_tap_producer_b;
SELECT is((jobs.get(pg_temp.id('a1'))).id, pg_temp.id('a1'), 'ownership off: producer B reads producer A''s job');
SELECT is((jobs.cancel(pg_temp.id('a1'), 'by b')).accepted, true, 'ownership off: producer B cancels producer A''s job');
RESET SESSION AUTHORIZATION;

-- on.
SELECT results_eq($$ SELECT producer_ownership FROM jobs.configure_producers() $$, $$ VALUES (false) $$,
                  'configure_producers: no arguments reads the setting (off)');
SELECT results_eq($$ SELECT producer_ownership FROM jobs.configure_producers(ownership => true) $$, $$ VALUES (true) $$,
                  'configure_producers: ownership switched on');
INSERT INTO snap SELECT pg_temp.id(n), pg_temp.state(pg_temp.id(n)) FROM unnest(ARRAY['a2', 'a3', 'b1']) AS n;

SET SESSION AUTHORIZATION jobfence_tap_producer_b;
SELECT is(pg_temp.error_of(format('SELECT jobs.get(%s)', pg_temp.id('a2'))), 'JB002 jobs.get hint=true',
          'ownership on: producer B reading producer A''s job -> JB002 (as if it did not exist)');
SELECT throws_ok(format('SELECT jobs.get(%s)', pg_temp.id('a2')), 'JB002',
                 format('jobs.get: job %s not found', pg_temp.id('a2')),
                 'ownership on: ... with the very message of an unknown id, so ids cannot be probed');
SELECT is(pg_temp.error_of(format('SELECT jobs.cancel(%s, %L)', pg_temp.id('a2'), 'by b')), 'JB002 jobs.cancel hint=true',
          'ownership on: producer B cancelling producer A''s job -> JB002');
SELECT is(jobs.mark_enqueue_failed(ARRAY[pg_temp.id('a2'), pg_temp.id('b1')]), 1,
          'ownership on: producer B marking A''s and its own job marks only its own');
SELECT is((jobs.get(pg_temp.id('b1'))).status, 'enqueue_failed'::jobs.status, 'ownership on: producer B reads its own job');
SELECT is((jobs.cancel(pg_temp.id('b1'))).status, 'failed'::jobs.status, 'ownership on: producer B cancels its own job');
SELECT is_empty(format('SELECT * FROM jobs.events(%s)', pg_temp.id('a2')),
                'ownership on: producer B sees no history of producer A''s job (as for an unknown id)');
SELECT is_empty(format('SELECT * FROM jobs.children(%s)', pg_temp.id('a_fan')),
                'ownership on: producer B sees no children of producer A''s coordinator');
SELECT is((SELECT count(*) FROM jobs.list_jobs() WHERE submitted_by <> 'jobfence_tap_producer_b'::regrole), 0::bigint,
          'ownership on: producer B''s list_jobs pages through its own jobs only');
SELECT ok((SELECT count(*) FROM jobs.list_jobs(max_jobs => 1000)) >= 1, 'ownership on: ... and does list them');
RESET SESSION AUTHORIZATION;
SET SESSION AUTHORIZATION jobfence_tap_producer_a;
SELECT is((SELECT count(*) FROM jobs.children(pg_temp.id('a_fan'))), 1::bigint,
          'ownership on: producer A reads its own coordinator''s children');
SELECT ok((SELECT count(*) FROM jobs.events(pg_temp.id('a2'))) >= 1, 'ownership on: producer A reads its own job''s history');
RESET SESSION AUTHORIZATION;
SELECT is(pg_temp.state(pg_temp.id('a2')), (SELECT r FROM snap WHERE id = pg_temp.id('a2')),
          'ownership on: B''s refused get, cancel and mark changed nothing of A''s job (row and events)');
SELECT is(pg_temp.state(pg_temp.id('a3')), (SELECT r FROM snap WHERE id = pg_temp.id('a3')),
          'ownership on: ... nor of A''s other job');

-- A keeps full use of its own jobs.
SET SESSION AUTHORIZATION jobfence_tap_producer_a;
SELECT is((jobs.get(pg_temp.id('a2'))).id, pg_temp.id('a2'), 'ownership on: producer A reads its own job');
SELECT is(jobs.mark_enqueue_failed(ARRAY[pg_temp.id('a2')]), 1, 'ownership on: producer A marks its own job');
SELECT is((jobs.cancel(pg_temp.id('a2'), 'by a')).status, 'failed'::jobs.status, 'ownership on: producer A cancels its own job');
SELECT is(pg_temp.error_of(format('SELECT jobs.get(%s)', pg_temp.id('b1'))), 'JB002 jobs.get hint=true',
          'ownership on: producer A reading producer B''s job -> JB002');
RESET SESSION AUTHORIZATION;

-- the job graph: an edge to another producer's job would let B wait on, and learn the fate of,
-- a job it may not see; it is refused as unknown, and nothing is written.
SET SESSION AUTHORIZATION jobfence_tap_producer_b;
SELECT is(pg_temp.error_of(format($$SELECT jobs.submit('own_t', depends_on => ARRAY[%s])$$, pg_temp.id('a3'))),
          '22023 jobs.submit hint=true', 'ownership on: producer B depending on producer A''s job -> 22023');
SELECT throws_like(format($$SELECT jobs.submit('own_t', depends_on => ARRAY[%s])$$, pg_temp.id('a3')),
                   '%depends_on names unknown job ' || pg_temp.id('a3') || '%',
                   'ownership on: ... named as an unknown job, as for an id of no job');
SELECT is_empty(format('SELECT * FROM jobs.dependents(%s)', pg_temp.id('a3')),
                'ownership on: producer B reads no dependents of producer A''s job');
RESET SESSION AUTHORIZATION;
SELECT is((SELECT count(*) FROM jobs.job_dependency WHERE depends_on = pg_temp.id('a3')), 0::bigint,
          'ownership on: the refused submits wrote no edge');
SET SESSION AUTHORIZATION jobfence_tap_producer_a;
INSERT INTO ids SELECT 'a_dep', (jobs.submit('own_t', depends_on => ARRAY[pg_temp.id('a3')])).id;
SELECT is((SELECT array_agg(d.depends_on) FROM jobs.dependencies(pg_temp.id('a_dep')) AS d), ARRAY[pg_temp.id('a3')],
          'ownership on: producer A depends on its own job and reads the edge');
RESET SESSION AUTHORIZATION;

-- admins act on any job; workers read any job (claiming shows them any payload anyway).
SET SESSION AUTHORIZATION jobfence_tap_admin;
SELECT is((jobs.get(pg_temp.id('a3'))).id, pg_temp.id('a3'), 'ownership on: a jobs_admin member reads producer A''s job');
SELECT is(jobs.mark_enqueue_failed(ARRAY[pg_temp.id('a3')]), 1, 'ownership on: a jobs_admin member marks producer A''s job');
SELECT is((jobs.cancel(pg_temp.id('a3'), 'by admin')).status, 'failed'::jobs.status,
          'ownership on: a jobs_admin member cancels producer A''s job');
SELECT is(jobs.replay(pg_temp.id('a3')), true, 'ownership on: replay (jobs_admin only) re-drives producer A''s job');
RESET SESSION AUTHORIZATION;
SET SESSION AUTHORIZATION jobfence_tap_worker;
SELECT is((jobs.get(pg_temp.id('a3'))).id, pg_temp.id('a3'), 'ownership on: a jobs_worker member reads producer A''s job');
SELECT is((SELECT count(*) FROM jobs.claim(pg_temp.id('a3'), 'w1')), 1::bigint,
          'ownership on: workers claim any producer''s job (ownership binds producers only)');
RESET SESSION AUTHORIZATION;

-- SET ROLE does not change the owner: it is the login (session) role.
SET SESSION AUTHORIZATION jobfence_tap_producer_a;
SET ROLE jobs_producer;
SELECT is((jobs.submit('own_t')).submitted_by, 'jobfence_tap_producer_a'::regrole,
          'ownership: after SET ROLE the job still belongs to the session''s login role');
RESET ROLE;
RESET SESSION AUTHORIZATION;

-- idempotency keys: with ownership on, each producer's keys are its own (a repeated key never
-- hands one producer another's job); admins share one namespace, as everyone does when off.
SET SESSION AUTHORIZATION jobfence_tap_producer_a;
INSERT INTO ids SELECT 'a_key', (jobs.submit('own_t', '{"card": "4111"}', idempotency_key => 'K')).id;
INSERT INTO ids SELECT 'a_fan_key', (jobs.fan_out('[{"kind": "own_t", "idempotency_key": "KC"}]',
                                                  '{"kind": "own_t", "idempotency_key": "KF"}')).id;
RESET SESSION AUTHORIZATION;
SET SESSION AUTHORIZATION jobfence_tap_producer_b;
INSERT INTO ids SELECT 'b_key', (jobs.submit('own_t', '{"n": "b"}', idempotency_key => 'K')).id;
RESET SESSION AUTHORIZATION;
SELECT isnt(pg_temp.id('b_key'), pg_temp.id('a_key'),
            'ownership on: producer B submitting producer A''s idempotency key gets a job of its own, not A''s');
SELECT is((SELECT (submitted_by, key_owner, payload)::text FROM jobs.job WHERE id = pg_temp.id('b_key')),
          '(jobfence_tap_producer_b,jobfence_tap_producer_b,"{""n"": ""b""}")',
          'ownership on: ... holding B''s payload, in B''s key namespace');
SET SESSION AUTHORIZATION jobfence_tap_producer_b;
SELECT is((jobs.submit('own_t', '{"n": "b2"}', idempotency_key => 'K')).id, pg_temp.id('b_key'),
          'ownership on: B repeating its key gets its own job back');
INSERT INTO ids SELECT 'b_many_' || x.ord, x.id
  FROM unnest(ARRAY(SELECT s.id FROM jobs.submit_many('[{"kind": "own_t", "idempotency_key": "K"},
                                                        {"kind": "own_t", "idempotency_key": "KF"}]') AS s))
       WITH ORDINALITY AS x(id, ord);
SELECT is(pg_temp.id('b_many_1'), pg_temp.id('b_key'), 'ownership on: submit_many by B returns its own job for K');
SELECT is((SELECT submitted_by FROM jobs.get(pg_temp.id('b_many_2'))), 'jobfence_tap_producer_b'::regrole,
          'ownership on: ... and a new job of its own for A''s key KF, not A''s coordinator');
INSERT INTO ids SELECT 'b_fan_key', (jobs.fan_out('[{"kind": "own_t", "idempotency_key": "KC"}]',
                                                  '{"kind": "own_t", "idempotency_key": "KF2"}')).id;
SELECT isnt(pg_temp.id('b_fan_key'), pg_temp.id('a_fan_key'),
            'ownership on: fan_out by B with A''s child key creates B''s own coordinator and child (no 22023)');
RESET SESSION AUTHORIZATION;
SELECT is((SELECT count(*) FROM jobs.job WHERE submitted_by = 'jobfence_tap_producer_b'::regrole
                                           AND (id = pg_temp.id('b_fan_key') OR parent_id = pg_temp.id('b_fan_key'))), 2::bigint,
          'ownership on: ... both in B''s name');
SET SESSION AUTHORIZATION jobfence_tap_producer_a;
SELECT is((jobs.submit('own_t', '{}', idempotency_key => 'K')).id, pg_temp.id('a_key'),
          'ownership on: A repeating K still gets its own job');
SELECT is((jobs.submit('own_t', '{}', idempotency_key => 'KF')).id, pg_temp.id('a_fan_key'),
          'ownership on: ... and its own coordinator for KF');
RESET SESSION AUTHORIZATION;
SET SESSION AUTHORIZATION jobfence_tap_admin;
INSERT INTO ids SELECT 'admin_key', (jobs.submit('own_t', '{}', idempotency_key => 'K')).id;
RESET SESSION AUTHORIZATION;
SELECT is((SELECT key_owner IS NULL AND id NOT IN (pg_temp.id('a_key'), pg_temp.id('b_key'))
             FROM jobs.job WHERE id = pg_temp.id('admin_key')), true,
          'ownership on: a jobs_admin member''s key is in the shared namespace, apart from the producers''');

-- unknown ids keep their JB002 either way.
SET SESSION AUTHORIZATION jobfence_tap_producer_a;
SELECT is(pg_temp.error_of('SELECT jobs.get(-1)'), 'JB002 jobs.get hint=true', 'ownership on: an unknown id -> JB002');
RESET SESSION AUTHORIZATION;

-- off again: B may act on A's jobs once more.
SELECT jobs.configure_producers(ownership => false);
SET SESSION AUTHORIZATION jobfence_tap_producer_b;
SELECT is((jobs.get(pg_temp.id('a_many'))).id, pg_temp.id('a_many'), 'ownership off again: producer B reads A''s job');
SELECT is((jobs.cancel(pg_temp.id('a_many'))).accepted, true, 'ownership off again: producer B cancels A''s job');
SELECT is((jobs.submit('own_t', '{}', idempotency_key => 'K-off')).key_owner, NULL::regrole,
          'ownership off: keys are in the shared namespace');
RESET SESSION AUTHORIZATION;
SET SESSION AUTHORIZATION jobfence_tap_producer_a;
SELECT is((jobs.submit('own_t', '{}', idempotency_key => 'K-off')).submitted_by, 'jobfence_tap_producer_b'::regrole,
          'ownership off: producer A repeating B''s key gets that job (one namespace, as documented)');
RESET SESSION AUTHORIZATION;
SELECT is(session_user::text, current_user::text, 'ownership: the test is back to its own session user');

SELECT * FROM finish();
ROLLBACK;
