-- pgTAP tests for jobs.audit(reaper_interval, examples): the invariants over the recorded
-- history (docs/reliability.md). A real history through every kind of transition audits
-- clean; each forged corruption is found by its check, and only by it.
BEGIN;
SELECT plan(14);
\ir helpers/lease_helpers.psql

DO $$
DECLARE lv bigint;
BEGIN
    PERFORM jobs.define_type('ta.k', max_retries => 1, backoff_base => '1 second', backoff_max => '1 second');
    PERFORM pg_temp.running('done', 'ta.k', 'w1');
    PERFORM jobs.complete(pg_temp.id('done'), 'w1', 1, '{}');
    PERFORM pg_temp.running('retried', 'ta.k', 'w1');
    PERFORM jobs.fail(pg_temp.id('retried'), 'w1', 1, 'boom');
    PERFORM pg_temp.elapse(pg_temp.id('retried'), '5 seconds');
    SELECT l.lease_version INTO lv FROM jobs.claim(pg_temp.id('retried'), 'w2') AS l;
    PERFORM jobs.complete(pg_temp.id('retried'), 'w2', lv, '{}');
    PERFORM pg_temp.running('reaped', 'ta.k', 'w1');
    PERFORM pg_temp.elapse(pg_temp.id('reaped'), '1 minute');
    PERFORM jobs.reap();
    PERFORM pg_temp.running('cancelled', 'ta.k', 'w1');
    PERFORM jobs.cancel(pg_temp.id('cancelled'));
    PERFORM jobs.fail(pg_temp.id('cancelled'), 'w1', 1, 'stopped');
    PERFORM pg_temp.running('dead', 'ta.k', 'w1');
    PERFORM jobs.fail(pg_temp.id('dead'), 'w1', 1, 'fatal', false);
    PERFORM jobs.replay(pg_temp.id('dead'));
    PERFORM pg_temp.job('parked', 'ta.k');
    PERFORM jobs.mark_enqueue_failed(ARRAY[pg_temp.id('parked')]);
    PERFORM jobs.recover_enqueue_failed();
    PERFORM jobs.fan_out('[{"kind": "ta.k"}, {"kind": "ta.k"}]', '{"kind": "ta.k"}');
END $$;

SELECT is(ARRAY(SELECT check_name FROM jobs.audit()),
          ARRAY['legal_transitions', 'chained_history', 'lease_versions', 'one_completion', 'row_matches_history',
                'history_of_every_job', 'leases_reaped'], 'audit: one row per check, in a fixed order');
SELECT is((SELECT sum(violations) FROM jobs.audit()), 0::numeric,
          'audit: a history made by the functions themselves (claims, retries, reaps, cancels, replays, fan-out) is clean');

-- forged corruptions, one per check
CREATE FUNCTION pg_temp.found(c text) RETURNS bigint[] LANGUAGE sql AS $$
    SELECT example_job_ids FROM jobs.audit() WHERE check_name = c $$;
INSERT INTO jobs.event (job_id, from_status, to_status, lease_version, reason)
VALUES (pg_temp.id('done'), 'done', 'queued', 1, 'replayed');   -- done -> queued is no transition
SELECT is(pg_temp.found('legal_transitions'), ARRAY[pg_temp.id('done')], 'audit: an event outside the transition table is found');

-- after done, from processing; twice, since the job's own completion (its claimant's) is
-- read from its row only while jobs.event holds none.
INSERT INTO jobs.event (job_id, from_status, to_status, lease_version, worker, reason)
VALUES (pg_temp.id('retried'), 'processing', 'done', 2, 'w9', 'completed'),
       (pg_temp.id('retried'), 'processing', 'done', 2, 'w9', 'completed');
SELECT ok(pg_temp.id('retried') = ANY (pg_temp.found('chained_history')), 'audit: an event that does not start where the last ended is found');
SELECT ok(pg_temp.id('retried') = ANY (pg_temp.found('one_completion')), 'audit: a second accepted completion of a job is found');

INSERT INTO jobs.event (job_id, from_status, to_status, lease_version, worker, reason)
VALUES (pg_temp.id('reaped'), 'queued', 'processing', 7, 'w9', 'claimed');   -- 2 -> 7
SELECT ok(pg_temp.id('reaped') = ANY (pg_temp.found('lease_versions')), 'audit: a lease_version that jumps is found');
SELECT ok(pg_temp.id('reaped') = ANY (pg_temp.found('row_matches_history')), 'audit: a row that disagrees with its last event is found');

-- Set done behind the functions' back, the row reads as a completion (jobs.history), with no
-- claim before it.
UPDATE jobs.job SET status = 'done', finished_at = now() WHERE id = pg_temp.id('parked');
SELECT ok(pg_temp.id('parked') = ANY (pg_temp.found('chained_history')), 'audit: a row changed behind the functions'' back is found');

-- A job's submission is its row (jobs.history), so a job always has a history; what can go
-- missing is the rest of it, or the job under a history.
DELETE FROM jobs.event WHERE job_id = pg_temp.id('cancelled');
SELECT ok(pg_temp.id('cancelled') = ANY (pg_temp.found('row_matches_history')),
          'audit: a job whose transitions after its submission are gone is found (its row is past its submission)');
DELETE FROM jobs.job WHERE id = pg_temp.id('dead');
SELECT is(pg_temp.found('history_of_every_job'), ARRAY[pg_temp.id('dead')], 'audit: a history whose job is gone (not by retention) is found');

SELECT pg_temp.running('stuck', 'ta.k', 'w1');
UPDATE jobs.job SET lease_expires_at = now() - interval '11 seconds' WHERE id = pg_temp.id('stuck');
SELECT is(pg_temp.found('leases_reaped'), ARRAY[pg_temp.id('stuck')], 'audit: a lease 11 s past its expiry (two 5 s intervals) is found');
SELECT is((SELECT violations FROM jobs.audit(reaper_interval => '10 seconds') WHERE check_name = 'leases_reaped'), 0::bigint,
          'audit: with reapers every 10 s, 11 s past expiry is not yet stuck');

SELECT is(pg_temp.error_of($$ SELECT * FROM jobs.audit('0 seconds') $$), '22023 jobs.audit hint=true', 'audit: reaper_interval 0 -> 22023');
SELECT is(pg_temp.error_of($$ SELECT * FROM jobs.audit(examples => -1) $$), '22023 jobs.audit hint=true', 'audit: examples -1 -> 22023');

SELECT * FROM finish();
ROLLBACK;
