-- pgTAP tests for jobs.list_jobs(kind, status, before_id, max_jobs, queue): keyset pages of jobs,
-- newest first. Contract: docs/sql-api.md (list_jobs).
BEGIN;
SELECT plan(18);
\ir helpers/lease_helpers.psql

DO $$ BEGIN
    PERFORM jobs.define_type('tl.a');
    PERFORM jobs.define_type('tl.b', max_retries => 0);
    FOR i IN 1 .. 5 LOOP PERFORM pg_temp.job('a' || i, 'tl.a'); END LOOP;
    FOR i IN 1 .. 3 LOOP PERFORM pg_temp.job('b' || i, 'tl.b'); END LOOP;
    PERFORM pg_temp.running('run', 'tl.a', 'w1');
    PERFORM pg_temp.running('dead', 'tl.b', 'w1');
    PERFORM jobs.fail(pg_temp.id('dead'), 'w1', 1, 'boom');
    PERFORM pg_temp.running('done', 'tl.a', 'w1');
    PERFORM jobs.complete(pg_temp.id('done'), 'w1', 1, '{}');
    PERFORM jobs.mark_enqueue_failed(ARRAY[pg_temp.id('b3')]);
    PERFORM jobs.define_type('tl.c', queue => 'tl-other');
    PERFORM pg_temp.job('c1', 'tl.c');
END $$;

SELECT is(ARRAY(SELECT id FROM jobs.list_jobs()), ARRAY(SELECT id FROM jobs.job ORDER BY id DESC),
          'list_jobs: every job, newest first');
SELECT is(ARRAY(SELECT id FROM jobs.list_jobs(max_jobs => 3)), ARRAY(SELECT id FROM jobs.job ORDER BY id DESC LIMIT 3),
          'list_jobs: max_jobs caps the page');
SELECT is(ARRAY(SELECT id FROM jobs.list_jobs(max_jobs => 3, before_id => (SELECT min(id) FROM jobs.list_jobs(max_jobs => 3)))),
          ARRAY(SELECT id FROM jobs.job ORDER BY id DESC OFFSET 3 LIMIT 3), 'list_jobs: before_id gives the next page');
SELECT is(ARRAY(SELECT id FROM jobs.list_jobs(kind => 'tl.b')), ARRAY(SELECT id FROM jobs.job WHERE kind = 'tl.b' ORDER BY id DESC),
          'list_jobs: one kind');
SELECT is(ARRAY(SELECT id FROM jobs.list_jobs(status => 'failed')), ARRAY[pg_temp.id('dead')], 'list_jobs: status failed');
SELECT is(ARRAY(SELECT id FROM jobs.list_jobs(status => 'processing')), ARRAY[pg_temp.id('run')], 'list_jobs: status processing');
SELECT is(ARRAY(SELECT id FROM jobs.list_jobs(status => 'done')), ARRAY[pg_temp.id('done')], 'list_jobs: status done');
SELECT is(ARRAY(SELECT id FROM jobs.list_jobs(status => 'enqueue_failed')), ARRAY[pg_temp.id('b3')], 'list_jobs: status enqueue_failed');
SELECT is(ARRAY(SELECT id FROM jobs.list_jobs(kind => 'tl.b', status => 'queued')), ARRAY[pg_temp.id('b2'), pg_temp.id('b1')],
          'list_jobs: kind and status together');
SELECT is(ARRAY(SELECT id FROM jobs.list_jobs(queue => 'tl-other')), ARRAY[pg_temp.id('c1')], 'list_jobs: one queue');
SELECT is(ARRAY(SELECT id FROM jobs.list_jobs(queue => 'tl-other', status => 'queued')), ARRAY[pg_temp.id('c1')],
          'list_jobs: queue and status together');
SELECT is((SELECT count(*) FROM jobs.list_jobs(queue => 'default', kind => 'tl.c')), 0::bigint,
          'list_jobs: queue and kind together (tl.c is not in default)');
SELECT is((SELECT count(*) FROM jobs.list_jobs(kind => 'tl.nosuch')), 0::bigint, 'list_jobs: an unknown kind is an empty page');
DO $$ BEGIN
    PERFORM pg_temp.job('k1', 'tl.a', '{}', NULL, 'acct-1');
    PERFORM pg_temp.running('k2', 'tl.a', 'w1');
    UPDATE jobs.job SET ordering_key = 'acct-1' WHERE id = pg_temp.id('k2');
    PERFORM jobs.complete(pg_temp.id('k2'), 'w1', 1, '{}');
    PERFORM pg_temp.job('k3', 'tl.a', '{}', NULL, 'acct-2');
END $$;
SELECT is(ARRAY(SELECT id FROM jobs.list_jobs(ordering_key => 'acct-1')), ARRAY[pg_temp.id('k2'), pg_temp.id('k1')],
          'list_jobs: one ordering key, every status, newest first');
SELECT is(ARRAY(SELECT id FROM jobs.list_jobs(ordering_key => 'acct-1', status => 'done')), ARRAY[pg_temp.id('k2')],
          'list_jobs: ordering key and status together');
SELECT is(ARRAY(SELECT id FROM jobs.list_jobs(ordering_key => 'acct-1', before_id => pg_temp.id('k2'))), ARRAY[pg_temp.id('k1')],
          'list_jobs: ordering key pages by before_id');
SELECT is(pg_temp.error_of($$ SELECT * FROM jobs.list_jobs(max_jobs => 0) $$), '22023 jobs.list_jobs hint=true', 'list_jobs: max_jobs 0 -> 22023');
SELECT is(pg_temp.error_of($$ SELECT * FROM jobs.list_jobs(max_jobs => 1001) $$), '22023 jobs.list_jobs hint=true', 'list_jobs: max_jobs 1001 -> 22023');

SELECT * FROM finish();
ROLLBACK;
