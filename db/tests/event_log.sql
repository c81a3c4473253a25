-- pgTAP tests for the transition log, read through jobs.history: every transition appends exactly one event
-- with the right fields; nothing else does. A submission is the job row itself, every later transition a
-- jobs.event row (docs/design.md "What is recorded where").
-- Contract: docs/design.md §2 (transition table), §3 (event columns, lease_version after the transition,
-- reasons), §8.3 (lease_version never decreases; every event sequence is a path of §2).
BEGIN;
SELECT plan(53);
-- Shared helpers (temporary objects, gone with the ROLLBACK).
\ir helpers/lease_helpers.psql

-- Where a job's history stands, as its number of transitions: a history only grows at its
-- end, though a claim the job row held moves into jobs.event (a new id) when a row of its
-- lease is written (docs/design.md "What is recorded where").
CREATE TEMP TABLE mark (job_id bigint PRIMARY KEY, seen bigint NOT NULL);
CREATE FUNCTION pg_temp.mark(bigint) RETURNS void LANGUAGE sql AS $$
    INSERT INTO mark SELECT $1, count(*) FROM jobs.history AS e WHERE e.job_id = $1
    ON CONFLICT (job_id) DO UPDATE SET seen = excluded.seen $$;
-- the events appended since the mark (NULL: none), as (from,to,lease_version,worker,reason,error) ...
CREATE FUNCTION pg_temp.new_events(bigint) RETURNS text LANGUAGE sql STABLE AS $$
    SELECT string_agg((h.from_status, h.to_status, h.lease_version, h.worker, h.reason, h.error)::text, ' ' ORDER BY h.n)
      FROM (SELECT e.*, row_number() OVER (ORDER BY e.id) AS n FROM jobs.history AS e WHERE e.job_id = $1) AS h
     WHERE h.n > coalesce((SELECT m.seen FROM mark AS m WHERE m.job_id = $1), 0) $$;

DO $$ BEGIN
    PERFORM jobs.define_type('tc.ev', queue => 'tc.ev.q', max_retries => 3);
    PERFORM jobs.define_type('tc.ev0', queue => 'tc.ev.q', max_retries => 0);
    PERFORM pg_temp.job('a', 'tc.ev');
END $$;

-- one job through every kind of transition
SELECT is(pg_temp.new_events(pg_temp.id('a')), '(,queued,0,,submitted,)', 'event_log: submit -> (new) -> queued, lease_version 0, submitted');
DO $$ BEGIN PERFORM pg_temp.mark(pg_temp.id('a')); PERFORM jobs.mark_enqueue_failed(ARRAY[pg_temp.id('a')]); END $$;
SELECT is(pg_temp.new_events(pg_temp.id('a')), '(queued,enqueue_failed,0,,enqueue_failed,)', 'event_log: mark_enqueue_failed -> queued -> enqueue_failed');
DO $$ BEGIN PERFORM pg_temp.mark(pg_temp.id('a')); PERFORM jobs.recover_enqueue_failed(); END $$;
SELECT is(pg_temp.new_events(pg_temp.id('a')), '(enqueue_failed,queued,0,,recovered,)', 'event_log: recover_enqueue_failed -> enqueue_failed -> queued, recovered');
DO $$ BEGIN PERFORM pg_temp.mark(pg_temp.id('a')); PERFORM jobs.claim(pg_temp.id('a'), 'w1'); END $$;
SELECT is(pg_temp.new_events(pg_temp.id('a')), '(queued,processing,1,w1,claimed,)', 'event_log: claim -> queued -> processing, lease_version 1, worker w1');
DO $$ BEGIN
    PERFORM pg_temp.mark(pg_temp.id('a'));
    PERFORM jobs.heartbeat(pg_temp.id('a'), 'w1', 1);
    PERFORM jobs.claim(pg_temp.id('a'), 'w2');
    PERFORM jobs.claim_many(ARRAY[pg_temp.id('a')], 'w2');
END $$;
SELECT is(pg_temp.new_events(pg_temp.id('a')), NULL, 'event_log: heartbeat and duplicate claims -> no event');
SELECT throws_ok($$ SELECT jobs.complete(pg_temp.id('a'), 'w2', 1) $$, 'JB001', NULL, 'event_log: stale complete is rejected');
SELECT is(pg_temp.new_events(pg_temp.id('a')), NULL, 'event_log: rejected complete -> no event');
DO $$ BEGIN PERFORM jobs.fail(pg_temp.id('a'), 'w1', 1, 'e1'); END $$;
SELECT is(pg_temp.new_events(pg_temp.id('a')), '(processing,queued,2,w1,retried,e1)', 'event_log: fail with budget left -> processing -> queued, lease_version 2, retried, error');
DO $$ BEGIN
    PERFORM pg_temp.mark(pg_temp.id('a'));
    UPDATE jobs.job SET run_after = now() WHERE id = pg_temp.id('a');   -- the backoff has passed
    PERFORM jobs.claim_many(ARRAY[pg_temp.id('a')], 'w2');
END $$;
SELECT is(pg_temp.new_events(pg_temp.id('a')), '(queued,processing,3,w2,claimed,)', 'event_log: claim_many -> queued -> processing, lease_version 3, worker w2');
DO $$ BEGIN PERFORM pg_temp.mark(pg_temp.id('a')); PERFORM pg_temp.elapse(pg_temp.id('a'), '16 seconds'); PERFORM jobs.reap(); END $$;
SELECT is(pg_temp.new_events(pg_temp.id('a')), '(processing,queued,4,w2,reaped,"lease expired")', 'event_log: reap with budget left -> processing -> queued, lease_version 4, reaped, lease expired');
-- a lease that reached its execution timeout: a timeout, not a lost worker
DO $$ BEGIN
    PERFORM pg_temp.running('to', 'tc.ev', 'w1');
    PERFORM pg_temp.mark(pg_temp.id('to'));
    UPDATE jobs.job SET lease_expires_at = claimed_at + timeout WHERE id = pg_temp.id('to');
    PERFORM pg_temp.elapse(pg_temp.id('to'), (SELECT timeout FROM jobs.job WHERE id = pg_temp.id('to')) + interval '1 second');
    PERFORM jobs.reap();
END $$;
SELECT is(pg_temp.new_events(pg_temp.id('to')), format('(processing,queued,2,w1,timed_out,"timeout after %s")',
          (SELECT timeout FROM jobs.job WHERE id = pg_temp.id('to'))),
    'event_log: reap of a lease at its execution timeout -> processing -> queued, lease_version 2, timed_out, timeout after ...');
DO $$ BEGIN PERFORM pg_temp.mark(pg_temp.id('a')); PERFORM jobs.claim_next('w3', ARRAY['tc.ev.q']); END $$;
SELECT is(pg_temp.new_events(pg_temp.id('a')), '(queued,processing,5,w3,claimed,)', 'event_log: claim_next -> queued -> processing, lease_version 5, worker w3');
DO $$ BEGIN PERFORM pg_temp.mark(pg_temp.id('a')); PERFORM jobs.cancel(pg_temp.id('a'), 'stop it'); END $$;
SELECT is(pg_temp.new_events(pg_temp.id('a')), '(processing,processing,5,w3,cancel_requested,"stop it")', 'event_log: cancel of a running job -> cancel_requested, status unchanged, lease_version 5');
DO $$ BEGIN PERFORM pg_temp.mark(pg_temp.id('a')); PERFORM jobs.cancel(pg_temp.id('a')); PERFORM jobs.heartbeat(pg_temp.id('a'), 'w3', 5); END $$;
SELECT is(pg_temp.new_events(pg_temp.id('a')), NULL, 'event_log: repeated cancel request -> no event');
DO $$ BEGIN PERFORM jobs.fail(pg_temp.id('a'), 'w3', 5, 'e2'); END $$;
SELECT is(pg_temp.new_events(pg_temp.id('a')), '(processing,failed,5,w3,cancelled,e2)', 'event_log: fail after a cancel request -> processing -> failed, lease_version 5, cancelled');
DO $$ BEGIN PERFORM pg_temp.mark(pg_temp.id('a')); PERFORM jobs.cancel(pg_temp.id('a')); END $$;
SELECT is(pg_temp.new_events(pg_temp.id('a')), NULL, 'event_log: cancel of a failed job -> no event');
DO $$ BEGIN PERFORM jobs.replay(pg_temp.id('a')); END $$;
SELECT is(pg_temp.new_events(pg_temp.id('a')), '(failed,queued,6,,replayed,e2)', 'event_log: replay -> failed -> queued, lease_version 6, replayed');
DO $$ BEGIN PERFORM pg_temp.mark(pg_temp.id('a')); PERFORM jobs.claim(pg_temp.id('a'), 'w4'); END $$;
SELECT is(pg_temp.new_events(pg_temp.id('a')), '(queued,processing,7,w4,claimed,)', 'event_log: claim after replay -> lease_version 7');
DO $$ BEGIN PERFORM pg_temp.mark(pg_temp.id('a')); PERFORM jobs.complete(pg_temp.id('a'), 'w4', 7, '{"ok": true}'); END $$;
SELECT is(pg_temp.new_events(pg_temp.id('a')), '(processing,done,7,w4,completed,)', 'event_log: complete -> processing -> done, lease_version 7 unchanged, completed');
DO $$ BEGIN PERFORM pg_temp.mark(pg_temp.id('a')); PERFORM jobs.replay(pg_temp.id('a')); PERFORM jobs.cancel(pg_temp.id('a')); PERFORM jobs.claim(pg_temp.id('a'), 'w5'); END $$;
SELECT is(pg_temp.new_events(pg_temp.id('a')), NULL, 'event_log: replay, cancel and claim of a done job -> no event');
SELECT results_eq($$ SELECT from_status, to_status, lease_version, worker, reason FROM jobs.history WHERE job_id = pg_temp.id('a') ORDER BY id $$,
    $$ VALUES (NULL::jobs.status, 'queued'::jobs.status, 0::bigint, NULL::text, 'submitted'::text),
              ('queued', 'enqueue_failed', 0, NULL, 'enqueue_failed'),
              ('enqueue_failed', 'queued', 0, NULL, 'recovered'),
              ('queued', 'processing', 1, 'w1', 'claimed'),
              ('processing', 'queued', 2, 'w1', 'retried'),
              ('queued', 'processing', 3, 'w2', 'claimed'),
              ('processing', 'queued', 4, 'w2', 'reaped'),
              ('queued', 'processing', 5, 'w3', 'claimed'),
              ('processing', 'processing', 5, 'w3', 'cancel_requested'),
              ('processing', 'failed', 5, 'w3', 'cancelled'),
              ('failed', 'queued', 6, NULL, 'replayed'),
              ('queued', 'processing', 7, 'w4', 'claimed'),
              ('processing', 'done', 7, 'w4', 'completed') $$,
    'event_log: the whole history of the job, oldest first, exactly one event per transition');

-- the other ways to end
DO $$ BEGIN
    PERFORM pg_temp.job('b', 'tc.ev');
    PERFORM pg_temp.job('c', 'tc.ev');
    PERFORM jobs.mark_enqueue_failed(ARRAY[pg_temp.id('c')]);
    PERFORM pg_temp.mark(pg_temp.id('b'));
    PERFORM pg_temp.mark(pg_temp.id('c'));
    PERFORM jobs.cancel(pg_temp.id('b'));
    PERFORM jobs.cancel(pg_temp.id('c'), 'gone');
END $$;
SELECT is(pg_temp.new_events(pg_temp.id('b')), '(queued,failed,0,,cancelled,cancelled)', 'event_log: cancel of a queued job -> queued -> failed, cancelled');
SELECT is(pg_temp.new_events(pg_temp.id('c')), '(enqueue_failed,failed,0,,cancelled,gone)', 'event_log: cancel of an enqueue_failed job -> enqueue_failed -> failed, cancelled');
DO $$ BEGIN
    PERFORM pg_temp.running('d', 'tc.ev0', 'w1');
    PERFORM pg_temp.running('e', 'tc.ev', 'w1');
    PERFORM pg_temp.mark(pg_temp.id('d'));
    PERFORM pg_temp.mark(pg_temp.id('e'));
    PERFORM jobs.fail(pg_temp.id('d'), 'w1', 1, 'boom');
    PERFORM jobs.fail(pg_temp.id('e'), 'w1', 1, 'bad input', retryable => false);
END $$;
SELECT is(pg_temp.new_events(pg_temp.id('d')), '(processing,failed,1,w1,exhausted,boom)', 'event_log: fail with the budget spent -> exhausted');
SELECT is(pg_temp.new_events(pg_temp.id('e')), '(processing,failed,1,w1,failed,"bad input")', 'event_log: non-retryable fail -> failed');
DO $$ BEGIN
    PERFORM pg_temp.running('f', 'tc.ev0', 'w1');
    PERFORM pg_temp.running('g', 'tc.ev', 'w1');
    PERFORM jobs.cancel(pg_temp.id('g'));
    PERFORM pg_temp.job('h', 'tc.ev');
    UPDATE jobs.job SET retry_count = 9 WHERE id = pg_temp.id('h');
    PERFORM pg_temp.mark(pg_temp.id('f'));
    PERFORM pg_temp.mark(pg_temp.id('g'));
    PERFORM pg_temp.mark(pg_temp.id('h'));
    PERFORM pg_temp.elapse(pg_temp.id('f'), '16 seconds');
    PERFORM pg_temp.elapse(pg_temp.id('g'), '16 seconds');
    PERFORM jobs.reap();
END $$;
SELECT is(pg_temp.new_events(pg_temp.id('f')), '(processing,failed,1,w1,exhausted,"lease expired")', 'event_log: reap with the budget spent -> exhausted, lease expired');
SELECT is(pg_temp.new_events(pg_temp.id('g')), '(processing,failed,1,w1,cancelled,"lease expired")', 'event_log: reap of a cancel-requested job -> cancelled');
SELECT is(pg_temp.new_events(pg_temp.id('h')), '(queued,failed,0,,exhausted,"retry budget exhausted")', 'event_log: reap of an overspent queued job -> queued -> failed, exhausted');

-- batches
DO $$ BEGIN
    PERFORM pg_temp.running('i', 'tc.ev', 'w1');
    PERFORM pg_temp.running('k', 'tc.ev', 'w1');
    PERFORM pg_temp.mark(pg_temp.id('i'));
    PERFORM pg_temp.mark(pg_temp.id('k'));
    PERFORM jobs.complete_many(ARRAY[pg_temp.id('i'), pg_temp.id('k'), pg_temp.id('i')], 'w1', ARRAY[1, 0, 1]::bigint[], NULL);
END $$;
SELECT is(pg_temp.new_events(pg_temp.id('i')), '(processing,done,1,w1,completed,)', 'event_log: complete_many accepted item (listed twice) -> one completed event');
SELECT is(pg_temp.new_events(pg_temp.id('k')), NULL, 'event_log: complete_many stale item -> no event');
DO $$ BEGIN
    INSERT INTO ids SELECT 'sm' || row_number() OVER (), s.id FROM jobs.submit_many('[{"kind": "tc.ev"}, {"kind": "tc.ev"}]') AS s;
    INSERT INTO ids SELECT 'coord', (jobs.fan_out('[{"kind": "tc.ev"}]', '{"kind": "tc.ev"}')).id;
    INSERT INTO ids SELECT 'child', j.id FROM jobs.job AS j WHERE j.parent_id = pg_temp.id('coord');
END $$;
SELECT is(pg_temp.new_events(pg_temp.id('sm1')) || ' ' || pg_temp.new_events(pg_temp.id('sm2')), '(,queued,0,,submitted,) (,queued,0,,submitted,)',
    'event_log: submit_many -> one submitted event per job');
SELECT is(pg_temp.new_events(pg_temp.id('coord')) || ' ' || pg_temp.new_events(pg_temp.id('child')), '(,queued,0,,submitted,) (,queued,0,,submitted,)',
    'event_log: fan_out -> one submitted event for the coordinator and for each child');
DO $$ BEGIN
    PERFORM pg_temp.mark(pg_temp.id('coord'));
    PERFORM jobs.complete(pg_temp.id('child'), 'w1', (SELECT lease_version FROM jobs.claim(pg_temp.id('child'), 'w1')));
END $$;
SELECT is(pg_temp.new_events(pg_temp.id('coord')), NULL, 'event_log: waking a coordinator is not a transition -> no event');
DO $$ BEGIN
    PERFORM pg_temp.running('sn', 'tc.ev', 'w1');
    PERFORM pg_temp.mark(pg_temp.id('sn'));
    PERFORM jobs.snooze(pg_temp.id('sn'), 'w1', 1, interval '1 minute');
END $$;
SELECT is(pg_temp.new_events(pg_temp.id('sn')), '(processing,queued,2,w1,snoozed,)', 'event_log: snooze -> snoozed, lease_version bumped, no error');
DO $$ BEGIN
    INSERT INTO ids SELECT 'db', (jobs.submit('tc.ev', '{"v": 1}', 'ev-db')).id;
    PERFORM pg_temp.mark(pg_temp.id('db'));
    PERFORM jobs.submit('tc.ev', '{"v": 2}', 'ev-db', debounce => 'payload');
END $$;
SELECT is(pg_temp.new_events(pg_temp.id('db')), '(queued,queued,0,,debounced,)', 'event_log: a debounced repeat -> queued -> queued, debounced, lease_version kept');

-- dependencies: a parent's finish releases (done) or fails (failed, policy fail) its dependent
DO $$ BEGIN
    PERFORM pg_temp.running('dp', 'tc.ev', 'w1');
    PERFORM pg_temp.running('dq', 'tc.ev', 'w1');
    INSERT INTO ids SELECT 'dr', s.id FROM jobs.submit_many(format('[{"kind": "tc.ev", "depends_on": [%s]}]', pg_temp.id('dp'))::jsonb) AS s;
    INSERT INTO ids SELECT 'dx', s.id FROM jobs.submit_many(format('[{"kind": "tc.ev", "depends_on": [%s]}]', pg_temp.id('dq'))::jsonb) AS s;
    PERFORM pg_temp.mark(pg_temp.id('dr'));
    PERFORM pg_temp.mark(pg_temp.id('dx'));
    PERFORM jobs.complete(pg_temp.id('dp'), 'w1', 1);
    PERFORM jobs.fail(pg_temp.id('dq'), 'w1', 1, 'boom', false);
END $$;
SELECT is(pg_temp.new_events(pg_temp.id('dr')), '(queued,queued,0,,released,)',
    'event_log: the last dependency done -> queued -> queued, released');
SELECT is(pg_temp.new_events(pg_temp.id('dx')), format('(queued,failed,0,,dependency_failed,"dependency %s failed")', pg_temp.id('dq')),
    'event_log: a dependency failed (policy fail) -> queued -> failed, dependency_failed, naming it');

-- invariants over every event written here
SELECT bag_eq($$ SELECT DISTINCT reason FROM jobs.history WHERE job_id IN (SELECT id FROM ids) $$,
    $$ SELECT DISTINCT t.reason FROM jobs.transitions() AS t $$,
    'event_log: every reason of the transition table occurs, and no other');
SELECT is_empty($$
    SELECT e.from_status, e.to_status, e.reason FROM jobs.history AS e WHERE e.job_id IN (SELECT id FROM ids)
    EXCEPT
    SELECT t.from_status, t.to_status, t.reason FROM jobs.transitions() AS t $$,
    'event_log: every event is an edge of the transition table (jobs.transitions)');
SELECT is_empty($$
    SELECT * FROM (SELECT e.job_id, e.id, e.from_status,
                          lag(e.to_status) OVER (PARTITION BY e.job_id ORDER BY e.id) AS previous,
                          row_number() OVER (PARTITION BY e.job_id ORDER BY e.id) AS n
                     FROM jobs.history AS e WHERE e.job_id IN (SELECT id FROM ids)) AS h
     WHERE h.from_status IS DISTINCT FROM h.previous $$,
    'event_log: every history is a path: each event starts where the previous one ended, the first from (new)');
SELECT is_empty($$
    SELECT * FROM (SELECT e.job_id, e.lease_version, lag(e.lease_version) OVER (PARTITION BY e.job_id ORDER BY e.id) AS previous
                     FROM jobs.history AS e WHERE e.job_id IN (SELECT id FROM ids)) AS h
     WHERE h.lease_version < h.previous $$,
    'event_log: lease_version never decreases along a history');
SELECT is_empty($$
    SELECT * FROM (SELECT e.from_status, e.to_status, e.reason, e.lease_version,
                          lag(e.lease_version) OVER (PARTITION BY e.job_id ORDER BY e.id) AS previous
                     FROM jobs.history AS e WHERE e.job_id IN (SELECT id FROM ids)) AS h
     WHERE h.previous IS NOT NULL
       AND h.lease_version <> h.previous + CASE WHEN (SELECT bool_or(t.bumps_lease_version) FROM jobs.transitions() AS t WHERE t.reason = h.reason) THEN 1 ELSE 0 END $$,
    'event_log: lease_version grows by one on claim and requeue (retried, reaped, replayed), never on done / failed / other events');
SELECT is_empty($$
    SELECT j.id FROM jobs.job AS j
      JOIN LATERAL (SELECT e.to_status, e.lease_version FROM jobs.history AS e WHERE e.job_id = j.id ORDER BY e.id DESC LIMIT 1) AS last ON true
     WHERE j.id IN (SELECT id FROM ids) AND (last.to_status <> j.status OR last.lease_version <> j.lease_version) $$,
    'event_log: the latest event of every job matches its current status and lease_version');
-- A submission's instant is the row's created_at and a claim's its claimed_at, which
-- pg_temp.elapse moves back with the row's other instants; the tests below check that they
-- are the row's.
SELECT is_empty($$ SELECT * FROM jobs.history WHERE job_id IN (SELECT id FROM ids) AND at <> now() AND reason NOT IN ('submitted', 'claimed') $$,
    'event_log: events are stamped with transaction time now()');
SELECT is_empty($$ SELECT * FROM jobs.history WHERE job_id IN (SELECT id FROM ids)
                    AND reason IN ('claimed', 'completed', 'retried', 'failed', 'cancel_requested') AND worker IS NULL $$,
    'event_log: claims, completions, worker failures and cancel requests name the worker');

-- What is recorded where (docs/design.md): a lease its claimant completes is read from the job
-- row alone; any other row of a lease is written after the lease's claim as a row.
DO $$ DECLARE v bigint; BEGIN
    PERFORM pg_temp.job('quiet', 'tc.ev');
    SELECT l.lease_version INTO v FROM jobs.claim(pg_temp.id('quiet'), 'w7') AS l;
    PERFORM jobs.complete(pg_temp.id('quiet'), 'w7', v, '{}');
    PERFORM pg_temp.job('loud', 'tc.ev');
    SELECT l.lease_version INTO v FROM jobs.claim(pg_temp.id('loud'), 'w7') AS l;
    PERFORM jobs.fail(pg_temp.id('loud'), 'w7', v, 'e7', true);
    PERFORM pg_temp.job('asked', 'tc.ev');
    SELECT l.lease_version INTO v FROM jobs.claim(pg_temp.id('asked'), 'w7') AS l;
    PERFORM jobs.cancel(pg_temp.id('asked'), 'stop');
    PERFORM jobs.complete(pg_temp.id('asked'), 'w7', v, '{}');
END $$;
SELECT is((SELECT count(*) FROM jobs.event WHERE job_id = pg_temp.id('quiet')), 0::bigint,
          'event_log: a lease its claimant completes writes no jobs.event row');
SELECT results_eq($$ SELECT h.id - 4503599627370496 - 2 * j.id, h.reason, h.at = CASE h.reason WHEN 'claimed' THEN j.claimed_at ELSE j.finished_at END,
                            h.worker, h.session_role = j.claim_role, h.lease_version
                       FROM jobs.history AS h JOIN jobs.job AS j ON j.id = h.job_id
                      WHERE h.job_id = pg_temp.id('quiet') AND h.reason <> 'submitted' ORDER BY h.id $$,
                  $$ VALUES (0::bigint, 'claimed', true, 'w7', true, 1::bigint), (1::bigint, 'completed', true, 'w7', true, 1::bigint) $$,
                  'event_log: ... its claim and completion read from the row: claimed_at, finished_at, owned_by, claim_role, ids 2^52 + 2 id (+ 1)');
SELECT results_eq($$ SELECT e.reason, e.lease_version, e.session_role = (SELECT claim_role FROM jobs.job WHERE id = pg_temp.id('quiet'))
                       FROM jobs.event AS e WHERE e.job_id = pg_temp.id('loud') ORDER BY e.id $$,
                  $$ VALUES ('claimed', 1::bigint, true), ('retried', 2::bigint, true) $$,
                  'event_log: a retry writes the lease''s claim as a row, then its own, in that order');
SELECT results_eq($$ SELECT e.reason FROM jobs.event AS e WHERE e.job_id = pg_temp.id('asked') ORDER BY e.id $$,
                  $$ VALUES ('claimed'), ('cancel_requested') $$,
                  'event_log: a cancel request on a running job writes the claim''s row first, once');
SELECT is(ARRAY(SELECT reason FROM jobs.events(pg_temp.id('asked'))), ARRAY['submitted', 'claimed', 'cancel_requested', 'completed'],
          'event_log: ... and the completion after it is read from the row, last');

-- The submission is the job row: jobs.event refuses one, jobs.history reads it from the row.
SELECT throws_ok($$ INSERT INTO jobs.event (job_id, to_status, lease_version, reason)
                    VALUES ((SELECT min(id) FROM ids), 'queued', 0, 'submitted') $$,
                 '23514', NULL, 'event_log: jobs.event refuses a submitted row (the job row records the submission)');
SELECT is_empty($$ SELECT h.job_id FROM jobs.history AS h JOIN jobs.job AS j ON j.id = h.job_id
                    WHERE h.job_id IN (SELECT id FROM ids) AND h.reason = 'submitted'
                      AND (h.id <> -j.id OR h.at <> j.created_at OR h.session_role <> j.submitted_by
                           OR h.from_status IS NOT NULL OR h.to_status <> 'queued' OR h.lease_version <> 0
                           OR h.worker IS NOT NULL OR h.error IS NOT NULL) $$,
    'event_log: a submission reads as (new) -> queued at lease_version 0, at the row''s created_at, by its submitted_by, with the job''s id negated');
SELECT is_empty($$ SELECT j.id FROM jobs.job AS j
                    WHERE j.id IN (SELECT id FROM ids)
                      AND ((SELECT count(*) FROM jobs.history AS h WHERE h.job_id = j.id AND h.reason = 'submitted') <> 1
                           OR (SELECT h.reason FROM jobs.history AS h WHERE h.job_id = j.id ORDER BY h.id LIMIT 1) <> 'submitted') $$,
    'event_log: every job''s history holds one submission, first');

SELECT * FROM finish();
ROLLBACK;
