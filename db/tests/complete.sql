-- pgTAP tests for jobs.complete(job_id, worker, lease_version, result): processing -> done under the authority predicate.
-- Contract: DESIGN.md §2 (processing -> done, authority predicate, JB001), §4 (outcome, wake), §5, §8.2.
BEGIN;
SELECT plan(40);
-- Test helpers: temporary objects, gone with the ROLLBACK.
CREATE TEMP TABLE ids (name text PRIMARY KEY, id bigint NOT NULL);
CREATE TEMP TABLE snap (id bigint PRIMARY KEY, r text NOT NULL);
-- the id submitted under a test name
CREATE FUNCTION pg_temp.id(text) RETURNS bigint LANGUAGE sql STABLE
    AS $$ SELECT i.id FROM ids AS i WHERE i.name = $1 $$;
-- submit a job: name, kind, payload, run_after, ordering_key
CREATE FUNCTION pg_temp.job(text, text, jsonb DEFAULT '{}', timestamptz DEFAULT NULL, text DEFAULT NULL)
RETURNS bigint LANGUAGE sql
    AS $$ INSERT INTO ids SELECT $1, (jobs.submit($2, $3, NULL, $4, $5, false)).id RETURNING id $$;
-- submit a job and claim it for a worker: name, kind, worker; returns the lease_version
CREATE FUNCTION pg_temp.running(text, text, text) RETURNS bigint LANGUAGE sql
    AS $$ SELECT pg_temp.job($1, $2);
          SELECT l.lease_version FROM jobs.claim(pg_temp.id($1), $3) AS l $$;
CREATE FUNCTION pg_temp.lv(bigint) RETURNS bigint LANGUAGE sql STABLE
    AS $$ SELECT j.lease_version FROM jobs.job AS j WHERE j.id = $1 $$;
CREATE FUNCTION pg_temp.nevents(bigint) RETURNS bigint LANGUAGE sql STABLE
    AS $$ SELECT count(*) FROM jobs.event AS e WHERE e.job_id = $1 $$;
-- the whole row and its number of events, as text: equal before and after = nothing written
CREATE FUNCTION pg_temp.state(bigint) RETURNS text LANGUAGE sql STABLE
    AS $$ SELECT j::text || ' events=' || pg_temp.nevents(j.id) FROM jobs.job AS j WHERE j.id = $1 $$;
CREATE FUNCTION pg_temp.snap(bigint) RETURNS void LANGUAGE sql
    AS $$ INSERT INTO snap VALUES ($1, pg_temp.state($1)) ON CONFLICT (id) DO UPDATE SET r = excluded.r $$;
CREATE FUNCTION pg_temp.snapped(bigint) RETURNS text LANGUAGE sql STABLE
    AS $$ SELECT s.r FROM snap AS s WHERE s.id = $1 $$;
-- (from_status,to_status,lease_version,worker,reason,error) of the job's latest event
CREATE FUNCTION pg_temp.last_event(bigint) RETURNS text LANGUAGE sql STABLE
    AS $$ SELECT (e.from_status, e.to_status, e.lease_version, e.worker, e.reason, e.error)::text
            FROM jobs.event AS e WHERE e.job_id = $1 ORDER BY e.id DESC LIMIT 1 $$;
-- let time pass for one job: move every timestamp it carries back by the interval
CREATE FUNCTION pg_temp.elapse(bigint, interval) RETURNS void LANGUAGE sql
    AS $$ UPDATE jobs.job AS j
             SET created_at = j.created_at - $2, updated_at = j.updated_at - $2,
                 claimed_at = j.claimed_at - $2, lease_expires_at = j.lease_expires_at - $2,
                 run_after = j.run_after - $2, finished_at = j.finished_at - $2,
                 cancel_requested_at = j.cancel_requested_at - $2
           WHERE j.id = $1 $$;
-- run a statement and describe its error: 'SQLSTATE function-named-in-message hint=true|false'
CREATE FUNCTION pg_temp.error_of(text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE st text; msg text; hint text;
BEGIN
    EXECUTE $1;
    RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, hint = PG_EXCEPTION_HINT;
    RETURN st || ' ' || split_part(msg, ':', 1) || ' hint=' || (coalesce(hint, '') <> '');
END $$;

DO $$ BEGIN
    PERFORM jobs.define_type('tc.done');
    PERFORM pg_temp.running('a', 'tc.done', 'w1');
END $$;

SELECT results_eq($$ SELECT * FROM jobs.complete(pg_temp.id('a'), 'w1', 1, '{"ok": true}') $$,
    $$ VALUES (pg_temp.id('a'), true, 'done'::jobs.status, now(), '{}'::bigint[]) $$,
    'complete: holder of the lease -> accepted, status done, run_after, empty wake');
SELECT results_eq(
    $$ SELECT status, result, finished_at, owned_by, claimed_at, lease_expires_at, lease_version, retry_count, error, updated_at
         FROM jobs.job WHERE id = pg_temp.id('a') $$,
    $$ VALUES ('done'::jobs.status, '{"ok": true}'::jsonb, now(), 'w1'::text, now(), NULL::timestamptz, 1::bigint, 0, NULL::text, now()) $$,
    'complete: row -> done with the result, finished_at now, owner and claimed_at kept, no lease, lease_version unchanged');
SELECT is(pg_temp.last_event(pg_temp.id('a')), '(processing,done,1,w1,completed,)',
    'complete: logs processing -> done, lease_version 1, worker, completed');
SELECT is(pg_temp.nevents(pg_temp.id('a')), 3::bigint, 'complete: exactly one event appended');

-- at most one accepted completion
SELECT pg_temp.snap(pg_temp.id('a'));
SELECT throws_ok($$ SELECT jobs.complete(pg_temp.id('a'), 'w1', 1, '{"ok": "again"}') $$, 'JB001', NULL,
    'complete: second completion with the same lease -> JB001');
SELECT is(pg_temp.state(pg_temp.id('a')), pg_temp.snapped(pg_temp.id('a')), 'complete: second completion -> row and events unchanged (first result kept)');

-- stale leases on a processing job
DO $$ BEGIN PERFORM pg_temp.running('s', 'tc.done', 'w1'); PERFORM pg_temp.snap(pg_temp.id('s')); END $$;
SELECT throws_ok($$ SELECT jobs.complete(pg_temp.id('s'), 'w1', 0, '{}') $$, 'JB001', NULL, 'complete: stale lease_version -> JB001');
SELECT is(pg_temp.state(pg_temp.id('s')), pg_temp.snapped(pg_temp.id('s')), 'complete: stale lease_version -> row unchanged');
SELECT throws_ok($$ SELECT jobs.complete(pg_temp.id('s'), 'w1', 2, '{}') $$, 'JB001', NULL, 'complete: future lease_version -> JB001');
SELECT throws_ok($$ SELECT jobs.complete(pg_temp.id('s'), 'w2', 1, '{}') $$, 'JB001', NULL, 'complete: right lease_version, wrong worker -> JB001');
SELECT is(pg_temp.state(pg_temp.id('s')), pg_temp.snapped(pg_temp.id('s')), 'complete: wrong worker / lease -> row and events unchanged');

-- never claimed
DO $$ BEGIN PERFORM pg_temp.job('q', 'tc.done'); PERFORM pg_temp.snap(pg_temp.id('q')); END $$;
SELECT throws_ok($$ SELECT jobs.complete(pg_temp.id('q'), 'w1', 0) $$, 'JB001', NULL, 'complete: queued job -> JB001');
SELECT is(pg_temp.state(pg_temp.id('q')), pg_temp.snapped(pg_temp.id('q')), 'complete: queued job -> row unchanged');

-- reaped, then reassigned: the old owner is fenced out, the new one wins
DO $$ BEGIN
    PERFORM pg_temp.running('r', 'tc.done', 'w1');
    PERFORM pg_temp.elapse(pg_temp.id('r'), '16 seconds');
    PERFORM jobs.reap();
    PERFORM pg_temp.snap(pg_temp.id('r'));
END $$;
SELECT throws_ok($$ SELECT jobs.complete(pg_temp.id('r'), 'w1', 1, '{"late": true}') $$, 'JB001', NULL, 'complete: after the reaper requeued the job -> JB001');
SELECT is(pg_temp.state(pg_temp.id('r')), pg_temp.snapped(pg_temp.id('r')), 'complete: reaped job -> row unchanged (still queued)');
DO $$ BEGIN PERFORM jobs.claim(pg_temp.id('r'), 'w2'); PERFORM pg_temp.snap(pg_temp.id('r')); END $$;
SELECT throws_ok($$ SELECT jobs.complete(pg_temp.id('r'), 'w1', 1, '{"late": true}') $$, 'JB001', NULL, 'complete: job reassigned to another worker, old lease -> JB001');
SELECT is(pg_temp.state(pg_temp.id('r')), pg_temp.snapped(pg_temp.id('r')), 'complete: reassigned job -> new owner''s row unchanged');
SELECT is((jobs.complete(pg_temp.id('r'), 'w2', 3, '{"second": true}')).accepted, true, 'complete: new owner with lease_version 3 -> accepted');
SELECT results_eq($$ SELECT status, result, owned_by, error FROM jobs.job WHERE id = pg_temp.id('r') $$,
    $$ VALUES ('done'::jobs.status, '{"second": true}'::jsonb, 'w2'::text, 'lease expired'::text) $$,
    'complete: new owner''s result stored; error keeps the latest failure');

-- failed jobs and unknown ids
DO $$ BEGIN
    PERFORM pg_temp.running('f', 'tc.done', 'w1');
    PERFORM jobs.fail(pg_temp.id('f'), 'w1', 1, 'fatal', retryable => false);
    PERFORM pg_temp.snap(pg_temp.id('f'));
END $$;
SELECT throws_ok($$ SELECT jobs.complete(pg_temp.id('f'), 'w1', 1) $$, 'JB001', NULL, 'complete: failed job -> JB001');
SELECT is(pg_temp.state(pg_temp.id('f')), pg_temp.snapped(pg_temp.id('f')), 'complete: failed job -> row unchanged');
SELECT throws_ok($$ SELECT jobs.complete(-42, 'w1', 1) $$, 'JB002', NULL, 'complete: unknown job -> JB002');

-- bad worker ids
SELECT throws_ok($$ SELECT jobs.complete(pg_temp.id('s'), '', 1) $$, '22023', NULL, 'complete: empty worker -> 22023');
SELECT throws_ok($$ SELECT jobs.complete(pg_temp.id('s'), NULL, 1) $$, '22023', NULL, 'complete: NULL worker -> 22023');
SELECT is(pg_temp.state(pg_temp.id('s')), pg_temp.snapped(pg_temp.id('s')), 'complete: rejected worker ids -> row unchanged');

-- a stale completion rolls back the caller's effects in the same transaction
CREATE TEMP TABLE effects (job_id bigint);
SELECT throws_ok($$ WITH e AS (INSERT INTO effects VALUES (pg_temp.id('s')) RETURNING job_id)
                    SELECT jobs.complete((SELECT job_id FROM e), 'w1', 0) $$, 'JB001', NULL,
    'complete: stale completion together with effects -> JB001');
SELECT is_empty($$ SELECT * FROM effects $$, 'complete: the stale worker''s effects roll back with its completion');

-- an expired lease nobody reaped still holds
DO $$ BEGIN PERFORM pg_temp.running('x', 'tc.done', 'w1'); PERFORM pg_temp.elapse(pg_temp.id('x'), '20 seconds'); END $$;
SELECT results_eq($$ SELECT accepted, status FROM jobs.complete(pg_temp.id('x'), 'w1', 1) $$, $$ VALUES (true, 'done'::jobs.status) $$,
    'complete: expired but unreaped lease -> accepted');
SELECT is((SELECT result FROM jobs.job WHERE id = pg_temp.id('x')), NULL::jsonb, 'complete: result omitted -> result NULL');

-- cancel requested: the work finished anyway
DO $$ BEGIN PERFORM pg_temp.running('c', 'tc.done', 'w1'); PERFORM jobs.cancel(pg_temp.id('c')); END $$;
SELECT results_eq($$ SELECT accepted, status FROM jobs.complete(pg_temp.id('c'), 'w1', 1, '{"n": 1}') $$, $$ VALUES (true, 'done'::jobs.status) $$,
    'complete: cancel-requested job whose work finished -> done');

-- wake: ordering-key successor and fan-in coordinator
DO $$ BEGIN
    PERFORM pg_temp.job('o1', 'tc.done', '{}', NULL, 'done:key');
    PERFORM pg_temp.job('o2', 'tc.done', '{}', NULL, 'done:key');
    PERFORM pg_temp.job('o3', 'tc.done', '{}', NULL, 'done:key');
    PERFORM jobs.claim(pg_temp.id('o1'), 'w1');
    INSERT INTO ids SELECT 'coord', (jobs.fan_out('[{"kind": "tc.done"}, {"kind": "tc.done"}]', '{"kind": "tc.done"}')).id;
    INSERT INTO ids SELECT 'child' || row_number() OVER (ORDER BY j.id), j.id FROM jobs.job AS j WHERE j.parent_id = pg_temp.id('coord');
    PERFORM jobs.claim_many(ARRAY[pg_temp.id('child1'), pg_temp.id('child2')], 'w1');
END $$;
SELECT is((jobs.complete(pg_temp.id('o1'), 'w1', 1)).wake, ARRAY[pg_temp.id('o2')],
    'complete: head of an ordering key -> wake lists the next job of that key only');
SELECT is((SELECT count(*) FROM jobs.claim(pg_temp.id('o3'), 'w1')), 0::bigint, 'complete: the third job of the key is still blocked');
SELECT is((jobs.complete(pg_temp.id('child1'), 'w1', 1)).wake, '{}'::bigint[],
    'complete: first of two children -> empty wake, coordinator still waits');
SELECT is((SELECT pending_children FROM jobs.job WHERE id = pg_temp.id('coord')), 1, 'complete: coordinator pending_children 2 -> 1');
SELECT is((jobs.complete(pg_temp.id('child2'), 'w1', 1)).wake, ARRAY[pg_temp.id('coord')],
    'complete: last child -> wake lists the coordinator');
SELECT is((SELECT count(*) FROM jobs.claim(pg_temp.id('coord'), 'w1')), 1::bigint, 'complete: woken coordinator is claimable');

SELECT is(pg_temp.error_of(format('SELECT jobs.complete(%s, %L, 0)', pg_temp.id('s'), 'w1')), 'JB001 jobs.complete hint=true',
    'complete: the JB001 message names jobs.complete and carries a HINT');
SELECT is(pg_temp.error_of('SELECT jobs.complete(-42, ''w1'', 1)'), 'JB002 jobs.complete hint=true',
    'complete: the JB002 message names jobs.complete and carries a HINT');
SELECT is(pg_temp.error_of('SELECT jobs.complete(-42, '''', 1)'), '22023 jobs.complete hint=true',
    'complete: the 22023 message names jobs.complete and carries a HINT');

-- roles
SET LOCAL ROLE jobs_producer;
SELECT throws_ok($$ SELECT jobs.complete(1, 'w1', 1) $$, '42501', NULL, 'complete: jobs_producer may not complete -> 42501');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
