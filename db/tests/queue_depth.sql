-- pgTAP tests for the view jobs.queue_depth: the backlog by cause per queue and kind.
-- Contract: docs/observability.md. "ready" must agree with jobs.claimable, the one definition
-- of claimable.
BEGIN;
SELECT plan(12);
\ir helpers/lease_helpers.psql

DO $$ BEGIN
    PERFORM jobs.define_type('tq.k', queue => 'tq');
    PERFORM jobs.define_type('tq.idle', queue => 'tq');
    PERFORM pg_temp.job('ready', 'tq.k');
    PERFORM pg_temp.elapse(pg_temp.id('ready'), '7 seconds');
    PERFORM pg_temp.job('delayed', 'tq.k', '{}', now() + interval '1 hour');
    PERFORM pg_temp.job('older', 'tq.k', '{}', NULL, 'acct:1');
    PERFORM pg_temp.job('younger', 'tq.k', '{}', NULL, 'acct:1');
    PERFORM pg_temp.running('running', 'tq.k', 'w1');
    PERFORM pg_temp.running('stuck', 'tq.k', 'w1');
    PERFORM pg_temp.elapse(pg_temp.id('stuck'), '1 hour');
    PERFORM pg_temp.job('unsignalled', 'tq.k');
    PERFORM jobs.mark_enqueue_failed(ARRAY[pg_temp.id('unsignalled')]);
    -- a fan-in: the child is ready, its coordinator waits for it.
    PERFORM jobs.fan_out('[{"kind": "tq.k"}]', '{"kind": "tq.k"}');
    -- terminal jobs are not depth.
    PERFORM pg_temp.running('done', 'tq.k', 'w1');
    PERFORM jobs.complete(pg_temp.id('done'), 'w1', 1, '{}');
END $$;

CREATE TEMP TABLE d AS SELECT * FROM jobs.queue_depth WHERE queue = 'tq' AND kind = 'tq.k';
SELECT is((SELECT count(*) FROM d), 1::bigint, 'queue_depth: one row per queue and kind');
SELECT is((SELECT queued_ready FROM d), 3::bigint, 'queue_depth: ready = the due job, the older of the key, the fan-out child');
SELECT is((SELECT queued_ready FROM d), (SELECT count(*) FROM jobs.claimable WHERE kind = 'tq.k'),
          'queue_depth: ready agrees with jobs.claimable');
SELECT is((SELECT queued_delayed FROM d), 1::bigint, 'queue_depth: delayed = run_after in the future');
SELECT is((SELECT queued_blocked FROM d), 2::bigint, 'queue_depth: blocked = behind an older job of its ordering key, or waiting for children');
SELECT is((SELECT processing FROM d), 2::bigint, 'queue_depth: processing counts every lease');
SELECT is((SELECT processing_expired FROM d), 1::bigint, 'queue_depth: processing_expired = leases past lease_expires_at');
SELECT is((SELECT enqueue_failed FROM d), 1::bigint, 'queue_depth: enqueue_failed');
SELECT is((SELECT oldest_ready_age FROM d), 7::double precision, 'queue_depth: oldest_ready_age = seconds the oldest ready job has been due');
SELECT is((SELECT ARRAY[queued_ready, queued_delayed, queued_blocked, processing, enqueue_failed] FROM jobs.queue_depth
            WHERE kind = 'tq.idle'), ARRAY[0, 0, 0, 0, 0]::bigint[], 'queue_depth: a declared kind without jobs has a row of zeros');
SELECT is((SELECT oldest_ready_age FROM jobs.queue_depth WHERE kind = 'tq.idle'), NULL, 'queue_depth: and no oldest age');
-- a job whose kind moved to another queue is counted where it is.
UPDATE jobs.job SET queue = 'tq.old' WHERE id = pg_temp.id('delayed');
SELECT is((SELECT queued_delayed FROM jobs.queue_depth WHERE queue = 'tq.old' AND kind = 'tq.k'), 1::bigint,
          'queue_depth: jobs are counted in the queue they were submitted to');

SELECT * FROM finish();
ROLLBACK;
