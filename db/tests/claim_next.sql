-- pgTAP tests for jobs.claim_next(worker, queues, max_jobs): poll for claimable jobs without Redis.
-- Contract: DESIGN.md §4 (claim_next: queues, max_jobs, SKIP LOCKED; claimable), §2, §5.
BEGIN;
SELECT plan(27);
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
    PERFORM jobs.define_type('tc.cn.a', queue => 'tc.cn.qa');
    PERFORM jobs.define_type('tc.cn.b', queue => 'tc.cn.qb');
    PERFORM jobs.define_type('tc.cn.c', queue => 'tc.cn.qc');
    PERFORM jobs.define_type('tc.cn.z', queue => 'tc.cn.qz');
    -- queue a: a2 is due earlier than a1 although its id is larger; a3 is not due
    PERFORM pg_temp.job('a1', 'tc.cn.a');
    PERFORM pg_temp.job('a2', 'tc.cn.a');
    PERFORM pg_temp.job('a3', 'tc.cn.a', '{}', now() + interval '1 hour');
    UPDATE jobs.job SET run_after = now() - interval '5 minutes' WHERE id = pg_temp.id('a1');
    UPDATE jobs.job SET run_after = now() - interval '10 minutes' WHERE id = pg_temp.id('a2');
    -- queues b and c interleave in due time: b1 (-3 min), c1 (-2 min), b2 (-1 min)
    PERFORM pg_temp.job('b1', 'tc.cn.b');
    PERFORM pg_temp.job('b2', 'tc.cn.b');
    PERFORM pg_temp.job('c1', 'tc.cn.c');
    UPDATE jobs.job SET run_after = now() - interval '3 minutes' WHERE id = pg_temp.id('b1');
    UPDATE jobs.job SET run_after = now() - interval '1 minutes' WHERE id = pg_temp.id('b2');
    UPDATE jobs.job SET run_after = now() - interval '2 minutes' WHERE id = pg_temp.id('c1');
    PERFORM pg_temp.snap(pg_temp.id('a3'));
END $$;

SELECT results_eq($$ SELECT job_id, lease_version, queue, attempt FROM jobs.claim_next('w1', ARRAY['tc.cn.qa']) $$,
    $$ VALUES (pg_temp.id('a2'), 1::bigint, 'tc.cn.qa'::text, 1) $$,
    'claim_next: default max_jobs 1 -> the oldest due job of the queue (smallest run_after, not smallest id)');
SELECT results_eq($$ SELECT status, owned_by, lease_version FROM jobs.job WHERE id = pg_temp.id('a2') $$,
    $$ VALUES ('processing'::jobs.status, 'w1'::text, 1::bigint) $$,
    'claim_next: claimed row -> processing, owned by the worker, lease_version 1');
SELECT is(pg_temp.last_event(pg_temp.id('a2')), '(queued,processing,1,w1,claimed,)',
    'claim_next: logs queued -> processing, lease_version 1, worker, claimed');
SELECT results_eq($$ SELECT job_id FROM jobs.claim_next('w1', ARRAY['tc.cn.qa'], 10) $$,
    $$ VALUES (pg_temp.id('a1')) $$,
    'claim_next: next call -> the remaining due job only; the job due in an hour is left');
SELECT is(pg_temp.state(pg_temp.id('a3')), pg_temp.snapped(pg_temp.id('a3')),
    'claim_next: not-due job -> row and events unchanged');
SELECT is_empty($$ SELECT * FROM jobs.claim_next('w1', ARRAY['tc.cn.qa'], 10) $$,
    'claim_next: queue with nothing due -> zero rows');

-- several queues: overall oldest first, limited by max_jobs, other queues untouched
SELECT bag_eq($$ SELECT job_id FROM jobs.claim_next('w2', ARRAY['tc.cn.qb', 'tc.cn.qc'], 2) $$,
    $$ VALUES (pg_temp.id('b1')), (pg_temp.id('c1')) $$,
    'claim_next: two queues, max_jobs 2 -> the two oldest due jobs across both queues');
SELECT is((SELECT status FROM jobs.job WHERE id = pg_temp.id('b2')), 'queued'::jobs.status,
    'claim_next: the younger job beyond max_jobs stays queued');
SELECT results_eq($$ SELECT job_id FROM jobs.claim_next('w2', ARRAY['tc.cn.qc', 'tc.cn.qb', 'tc.cn.qb'], 5) $$,
    $$ VALUES (pg_temp.id('b2')) $$,
    'claim_next: a queue named twice -> each job claimed once');

-- queue filter
DO $$ BEGIN PERFORM pg_temp.job('z1', 'tc.cn.z'); PERFORM pg_temp.snap(pg_temp.id('z1')); END $$;
SELECT is_empty($$ SELECT * FROM jobs.claim_next('w1', ARRAY['tc.cn.qa', 'tc.cn.qb', 'tc.cn.qc'], 10) $$,
    'claim_next: claimable job of another queue -> not returned');
SELECT is(pg_temp.state(pg_temp.id('z1')), pg_temp.snapped(pg_temp.id('z1')), 'claim_next: job of an unlisted queue -> row unchanged');
SELECT is_empty($$ SELECT * FROM jobs.claim_next('w1', ARRAY['tc.cn.nope'], 10) $$, 'claim_next: unknown queue -> zero rows');
SELECT is_empty($$ SELECT * FROM jobs.claim_next('w1', '{}'::text[], 10) $$, 'claim_next: empty queue list -> zero rows');

-- equal run_after: id order
DO $$ BEGIN
    PERFORM pg_temp.job('t1', 'tc.cn.z');
    PERFORM pg_temp.job('t2', 'tc.cn.z');
    UPDATE jobs.job SET run_after = now() - interval '1 hour'
     WHERE id IN (pg_temp.id('t1'), pg_temp.id('t2'), pg_temp.id('z1'));
END $$;
SELECT results_eq($$ SELECT job_id FROM jobs.claim_next('w1', ARRAY['tc.cn.qz'], 2) $$,
    $$ VALUES (pg_temp.id('z1')), (pg_temp.id('t1')) $$,
    'claim_next: equal run_after -> smallest ids first');

-- blocked jobs are skipped: ordering key and fan-in
DO $$ BEGIN
    PERFORM pg_temp.job('k1', 'tc.cn.b', '{}', NULL, 'cn:key');
    PERFORM pg_temp.job('k2', 'tc.cn.b', '{}', NULL, 'cn:key');
    -- the successor looks older than its predecessor: it must still wait
    UPDATE jobs.job SET run_after = now() - interval '1 day' WHERE id = pg_temp.id('k2');
    INSERT INTO ids SELECT 'coord', (jobs.fan_out('[{"kind": "tc.cn.c"}]', '{"kind": "tc.cn.b"}')).id;
    INSERT INTO ids SELECT 'child', j.id FROM jobs.job AS j WHERE j.parent_id = pg_temp.id('coord');
    UPDATE jobs.job SET run_after = now() - interval '1 day' WHERE id = pg_temp.id('coord');
    PERFORM pg_temp.snap(pg_temp.id('k2'));
    PERFORM pg_temp.snap(pg_temp.id('coord'));
END $$;
SELECT bag_eq($$ SELECT job_id FROM jobs.claim_next('w3', ARRAY['tc.cn.qb', 'tc.cn.qc'], 10) $$,
    $$ VALUES (pg_temp.id('k1')), (pg_temp.id('child')) $$,
    'claim_next: ordering-key successor and fan-in coordinator are skipped even when due earlier');
SELECT is(pg_temp.state(pg_temp.id('k2')) || pg_temp.state(pg_temp.id('coord')),
          pg_temp.snapped(pg_temp.id('k2')) || pg_temp.snapped(pg_temp.id('coord')),
    'claim_next: skipped blocked jobs -> rows and events unchanged');

-- queues NULL: every queue
DO $$ BEGIN
    PERFORM pg_temp.job('n1', 'tc.cn.a');
    PERFORM pg_temp.job('n2', 'tc.cn.z');
    PERFORM pg_temp.job('n3', 'tc.cn.b');
    UPDATE jobs.job SET run_after = now() - interval '100 years' WHERE id = pg_temp.id('n2');
    UPDATE jobs.job SET run_after = now() - interval '99 years' WHERE id = pg_temp.id('n1');
    UPDATE jobs.job SET run_after = now() - interval '98 years' WHERE id = pg_temp.id('n3');
END $$;
SELECT bag_eq($$ SELECT job_id FROM jobs.claim_next('w4', NULL, 2) $$,
    $$ VALUES (pg_temp.id('n2')), (pg_temp.id('n1')) $$,
    'claim_next: queues NULL -> the oldest due jobs of any queue, max_jobs of them');
SELECT results_eq($$ SELECT job_id FROM jobs.claim_next('w4') $$, $$ VALUES (pg_temp.id('n3')) $$,
    'claim_next: defaults (all queues, one job) -> the next oldest');

-- bad input
DO $$ BEGIN PERFORM pg_temp.job('bad', 'tc.cn.z'); PERFORM pg_temp.snap(pg_temp.id('bad')); END $$;
SELECT throws_ok($$ SELECT * FROM jobs.claim_next('w1', ARRAY['tc.cn.qz'], 0) $$, '22023', NULL, 'claim_next: max_jobs 0 -> 22023');
SELECT throws_ok($$ SELECT * FROM jobs.claim_next('w1', ARRAY['tc.cn.qz'], -1) $$, '22023', NULL, 'claim_next: negative max_jobs -> 22023');
SELECT throws_ok($$ SELECT * FROM jobs.claim_next('w1', ARRAY['tc.cn.qz'], NULL) $$, '22023', NULL, 'claim_next: NULL max_jobs -> 22023');
SELECT throws_ok($$ SELECT * FROM jobs.claim_next('', ARRAY['tc.cn.qz']) $$, '22023', NULL, 'claim_next: empty worker -> 22023');
SELECT throws_ok($$ SELECT * FROM jobs.claim_next(NULL, ARRAY['tc.cn.qz']) $$, '22023', NULL, 'claim_next: NULL worker -> 22023');
SELECT is(pg_temp.state(pg_temp.id('bad')), pg_temp.snapped(pg_temp.id('bad')), 'claim_next: rejected calls -> row and events unchanged');

SELECT is(pg_temp.error_of($$ SELECT * FROM jobs.claim_next('w1', NULL, 0) $$), '22023 jobs.claim_next hint=true',
    'claim_next: the 22023 message names jobs.claim_next and carries a HINT');

-- roles
SET LOCAL ROLE jobs_producer;
SELECT throws_ok($$ SELECT * FROM jobs.claim_next('w1') $$, '42501', NULL, 'claim_next: jobs_producer may not claim -> 42501');
RESET ROLE;
SET LOCAL ROLE jobs_worker;
SELECT is((SELECT count(*) FROM jobs.claim_next('w5', ARRAY['tc.cn.qz'])), 1::bigint,
    'claim_next: jobs_worker may claim');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
