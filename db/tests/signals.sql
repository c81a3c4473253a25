-- pgTAP tests for jobs.signals(job_ids), jobs.queues() and jobs.types(): the read-only lookups drivers batch.
-- Contract: docs/sql-api.md (signals, queues, types).
BEGIN;
SELECT plan(8);
\ir helpers/lease_helpers.psql

DO $$ BEGIN
    PERFORM jobs.define_type('tc.sig', queue => 'tc.sig.q');
    PERFORM jobs.define_type('tc.sig.other', queue => 'tc.sig.other.q');
    PERFORM pg_temp.job('due', 'tc.sig');
    PERFORM pg_temp.job('later', 'tc.sig', '{}', now() + interval '1 hour');
    PERFORM pg_temp.running('busy', 'tc.sig', 'w1');
    INSERT INTO ids SELECT 'coord', (jobs.fan_out('[{"kind": "tc.sig"}]', '{"kind": "tc.sig"}')).id;
END $$;

SELECT results_eq($$ SELECT job_id, queue, run_after FROM jobs.signals(ARRAY[pg_temp.id('later'), pg_temp.id('due'), pg_temp.id('busy'), pg_temp.id('coord'), -1, pg_temp.id('due')]) $$,
    $$ VALUES (pg_temp.id('due'), 'tc.sig.q'::text, now()), (pg_temp.id('later'), 'tc.sig.q'::text, now() + interval '1 hour') $$,
    'signals: queued jobs without pending children, by id, once each; running, waiting coordinators and unknown ids left out');
SELECT is_empty($$ SELECT * FROM jobs.signals('{}') $$, 'signals: no ids -> zero rows');

-- queues: declared kinds' queues plus queues that still hold queued jobs
DO $$ BEGIN
    PERFORM jobs.define_type('tc.sig.moved', queue => 'tc.sig.before');
    PERFORM pg_temp.job('stranded', 'tc.sig.moved');
    PERFORM jobs.define_type('tc.sig.moved', queue => 'tc.sig.after');
END $$;
SELECT ok((SELECT array_agg(queue) FROM jobs.queues()) @> ARRAY['tc.sig.q', 'tc.sig.other.q', 'tc.sig.after', 'tc.sig.before'],
    'queues: every declared kind''s queue and every queue still holding queued jobs (a kind that moved leaves its old queue listed)');
SELECT is((SELECT count(*) FROM jobs.queues() WHERE queue = 'tc.sig.q'), 1::bigint, 'queues: each queue once');
SELECT is((SELECT array_agg(queue) FROM jobs.queues()), (SELECT array_agg(queue ORDER BY queue) FROM jobs.queues()), 'queues: sorted');
DO $$ BEGIN PERFORM jobs.cancel(pg_temp.id('stranded')); END $$;
SELECT ok(NOT EXISTS (SELECT 1 FROM jobs.queues() WHERE queue = 'tc.sig.before'),
    'queues: a queue with no declared kind and no queued job is no longer listed');

SELECT results_eq($$ SELECT kind, queue FROM jobs.types() WHERE kind LIKE 'tc.sig%' $$,
    $$ VALUES ('tc.sig'::text, 'tc.sig.q'::text), ('tc.sig.moved', 'tc.sig.after'), ('tc.sig.other', 'tc.sig.other.q') $$,
    'types: every declared kind with its definition, by kind');
SELECT is((SELECT lease_timeout FROM jobs.types() WHERE kind = 'tc.sig'), interval '15 seconds', 'types: the stored definition, defaults included');

SELECT * FROM finish();
ROLLBACK;
