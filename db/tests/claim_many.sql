-- pgTAP tests for jobs.claim_many(job_ids, worker): claims those of the ids that are claimable now, skips the rest.
-- Contract: DESIGN.md §2 (queued -> processing), §4 (claimable; SETOF jobs.lease), §5.
BEGIN;
SELECT plan(21);
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
    PERFORM jobs.define_type('tc.cm', queue => 'tc.cm.q');
    PERFORM pg_temp.job('a', 'tc.cm', '{"i": "a"}');
    PERFORM pg_temp.job('b', 'tc.cm', '{"i": "b"}');
    PERFORM pg_temp.job('later', 'tc.cm', '{}', now() + interval '1 hour');
    PERFORM pg_temp.running('held', 'tc.cm', 'w0');
    PERFORM pg_temp.job('o1', 'tc.cm', '{}', NULL, 'tc.cm:1');
    PERFORM pg_temp.job('o2', 'tc.cm', '{}', NULL, 'tc.cm:1');
    PERFORM pg_temp.job('ef', 'tc.cm');
    PERFORM jobs.mark_enqueue_failed(ARRAY[pg_temp.id('ef')]);
    PERFORM pg_temp.snap(pg_temp.id('later'));
    PERFORM pg_temp.snap(pg_temp.id('held'));
    PERFORM pg_temp.snap(pg_temp.id('o2'));
    PERFORM pg_temp.snap(pg_temp.id('ef'));
END $$;

CREATE TEMP TABLE got AS
SELECT * FROM jobs.claim_many(
    ARRAY[pg_temp.id('b'), pg_temp.id('later'), -7, pg_temp.id('held'), pg_temp.id('a'),
          pg_temp.id('o2'), pg_temp.id('o1'), pg_temp.id('ef'), pg_temp.id('b')], 'w1');

SELECT bag_eq($$ SELECT job_id FROM got $$,
    $$ VALUES (pg_temp.id('a')), (pg_temp.id('b')), (pg_temp.id('o1')) $$,
    'claim_many: claims exactly the claimable ids, once each (duplicates, unknown, not-due, held, blocked, enqueue_failed skipped)');
SELECT results_eq(
    $$ SELECT job_id, lease_version, kind, queue, payload, attempt, lease_expires_at, timeout_at FROM got WHERE job_id = pg_temp.id('a') $$,
    $$ VALUES (pg_temp.id('a'), 1::bigint, 'tc.cm'::text, 'tc.cm.q'::text, '{"i": "a"}'::jsonb, 1,
               now() + interval '15 seconds', now() + interval '30 seconds') $$,
    'claim_many: each lease carries lease_version 1, kind, queue, payload, attempt 1, lease and timeout ends');
SELECT results_eq(
    $$ SELECT id, status, owned_by, lease_version, claimed_at FROM jobs.job
        WHERE id IN (pg_temp.id('a'), pg_temp.id('b'), pg_temp.id('o1')) ORDER BY id $$,
    $$ SELECT v.id, 'processing'::jobs.status, 'w1'::text, 1::bigint, now()
         FROM unnest(ARRAY[pg_temp.id('a'), pg_temp.id('b'), pg_temp.id('o1')]) AS v(id) ORDER BY v.id $$,
    'claim_many: claimed rows -> processing, owned_by worker, lease_version 1, claimed_at now');
SELECT results_eq(
    $$ SELECT job_id, from_status, to_status, lease_version, worker, reason FROM jobs.event
        WHERE job_id IN (pg_temp.id('a'), pg_temp.id('b'), pg_temp.id('o1')) AND reason = 'claimed' ORDER BY job_id $$,
    $$ SELECT v.id, 'queued'::jobs.status, 'processing'::jobs.status, 1::bigint, 'w1'::text, 'claimed'::text
         FROM unnest(ARRAY[pg_temp.id('a'), pg_temp.id('b'), pg_temp.id('o1')]) AS v(id) ORDER BY v.id $$,
    'claim_many: one claimed event per claimed job, even when the id was passed twice');
SELECT is(pg_temp.state(pg_temp.id('later')), pg_temp.snapped(pg_temp.id('later')), 'claim_many: skipped not-due job -> row unchanged');
SELECT is(pg_temp.state(pg_temp.id('held')), pg_temp.snapped(pg_temp.id('held')), 'claim_many: skipped job held by another worker -> row unchanged');
SELECT is(pg_temp.state(pg_temp.id('o2')), pg_temp.snapped(pg_temp.id('o2')), 'claim_many: blocked ordering-key job passed with its predecessor -> not claimed, row unchanged');
SELECT is(pg_temp.state(pg_temp.id('ef')), pg_temp.snapped(pg_temp.id('ef')), 'claim_many: skipped enqueue_failed job -> row unchanged');

-- duplicate delivery of the whole batch to another worker
DO $$ BEGIN PERFORM pg_temp.snap(pg_temp.id('a')); PERFORM pg_temp.snap(pg_temp.id('b')); END $$;
SELECT is_empty($$ SELECT * FROM jobs.claim_many(ARRAY[pg_temp.id('a'), pg_temp.id('b')], 'w2') $$,
    'claim_many: ids already claimed -> zero rows');
SELECT is(pg_temp.state(pg_temp.id('a')) || pg_temp.state(pg_temp.id('b')),
          pg_temp.snapped(pg_temp.id('a')) || pg_temp.snapped(pg_temp.id('b')),
    'claim_many: duplicate batch -> rows and events unchanged');
SELECT is_empty($$ SELECT * FROM jobs.claim_many(ARRAY[pg_temp.id('a')], 'w1') $$,
    'claim_many: same worker claims its own job again -> zero rows');

-- empty and bad input
SELECT is_empty($$ SELECT * FROM jobs.claim_many('{}', 'w1') $$, 'claim_many: empty array -> zero rows');
DO $$ BEGIN PERFORM pg_temp.job('c', 'tc.cm'); PERFORM pg_temp.snap(pg_temp.id('c')); END $$;
SELECT throws_ok($$ SELECT * FROM jobs.claim_many(NULL, 'w1') $$, '22023', NULL, 'claim_many: NULL job_ids -> 22023');
SELECT throws_ok($$ SELECT * FROM jobs.claim_many(ARRAY[pg_temp.id('c')], '') $$, '22023', NULL, 'claim_many: empty worker -> 22023');
SELECT throws_ok($$ SELECT * FROM jobs.claim_many(ARRAY[pg_temp.id('c')], NULL) $$, '22023', NULL, 'claim_many: NULL worker -> 22023');
SELECT is(pg_temp.state(pg_temp.id('c')), pg_temp.snapped(pg_temp.id('c')), 'claim_many: rejected call -> row and events unchanged');
SELECT results_eq($$ SELECT job_id, lease_version FROM jobs.claim_many(ARRAY[pg_temp.id('c'), NULL], 'w3') $$,
    $$ VALUES (pg_temp.id('c'), 1::bigint) $$, 'claim_many: a NULL element is skipped, the others claimed');

-- the successor becomes claimable once its predecessor ended
SELECT is((jobs.complete(pg_temp.id('o1'), 'w1', 1)).wake, ARRAY[pg_temp.id('o2')], 'claim_many: completing o1 wakes o2');
SELECT results_eq($$ SELECT job_id, lease_version, attempt FROM jobs.claim_many(ARRAY[pg_temp.id('o2')], 'w2') $$,
    $$ VALUES (pg_temp.id('o2'), 1::bigint, 1) $$, 'claim_many: ordering-key successor claimable after its predecessor is done');

SELECT is(pg_temp.error_of($$ SELECT * FROM jobs.claim_many(NULL, 'w1') $$), '22023 jobs.claim_many hint=true',
    'claim_many: the 22023 message names jobs.claim_many and carries a HINT');

-- roles
SET LOCAL ROLE jobs_producer;
SELECT throws_ok($$ SELECT * FROM jobs.claim_many(ARRAY[1::bigint], 'w1') $$, '42501', NULL, 'claim_many: jobs_producer may not claim -> 42501');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
