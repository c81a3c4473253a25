-- docs/design.md §8 invariants in SQL over a short end-to-end run touching every transition of §2:
-- every event sequence is a path of the transition table, lease_version never decreases, at
-- most one accepted completion, a stale lease never writes, duplicate signals are no-ops.
BEGIN;
SELECT plan(20);

SELECT jobs.define_type('inv_t', max_retries => 3);
SELECT jobs.define_type('inv_once', max_retries => 0);
CREATE TEMP TABLE j (name text, id bigint);
CREATE FUNCTION pg_temp.id(n text) RETURNS bigint LANGUAGE sql AS $$ SELECT id FROM j WHERE name = n $$;
CREATE FUNCTION pg_temp.lv(n text) RETURNS bigint LANGUAGE sql AS $$ SELECT lease_version FROM jobs.job WHERE id = pg_temp.id(n) $$;
CREATE FUNCTION pg_temp.expire(n text) RETURNS void LANGUAGE sql AS $$
    UPDATE jobs.job SET lease_expires_at = now() - interval '1 second' WHERE id = pg_temp.id(n);
$$;

-- §2, row by row.
INSERT INTO j SELECT 'a', (jobs.submit('inv_t', '{"p": "a"}')).id;                     -- (new) -> queued
SELECT * FROM jobs.claim(pg_temp.id('a'), 'w1');                                          -- queued -> processing
SELECT * FROM jobs.claim(pg_temp.id('a'), 'w2');                                          -- duplicate signal: nothing
SELECT jobs.complete(pg_temp.id('a'), 'w1', 1, '{"ok": 1}');                              -- processing -> done

INSERT INTO j SELECT 'b', (jobs.submit('inv_t', '{"p": "b"}')).id;
SELECT * FROM jobs.claim(pg_temp.id('b'), 'w1');
SELECT jobs.fail(pg_temp.id('b'), 'w1', 1, 'flaky');                                      -- processing -> queued (retried)
UPDATE jobs.job SET run_after = now() WHERE id = pg_temp.id('b');
SELECT * FROM jobs.claim(pg_temp.id('b'), 'w2');
SELECT pg_temp.expire('b');
SELECT * FROM jobs.reap();                                                                -- processing -> queued (reaped)
SELECT * FROM jobs.claim(pg_temp.id('b'), 'w3');

INSERT INTO j SELECT 'c', (jobs.submit('inv_t', '{"p": "c"}')).id;
SELECT jobs.mark_enqueue_failed(ARRAY[pg_temp.id('c')]);                                   -- queued -> enqueue_failed
SELECT * FROM jobs.recover_enqueue_failed();                                              -- enqueue_failed -> queued
SELECT * FROM jobs.claim(pg_temp.id('c'), 'w1');
SELECT jobs.fail(pg_temp.id('c'), 'w1', 1, 'permanent', retryable => false);               -- processing -> failed
SELECT jobs.replay(pg_temp.id('c'));                                                      -- failed -> queued
SELECT jobs.complete(pg_temp.id('c'), 'w2', (SELECT lease_version FROM jobs.claim(pg_temp.id('c'), 'w2')));

INSERT INTO j SELECT 'd', (jobs.submit('inv_t')).id;
SELECT jobs.cancel(pg_temp.id('d'));                                                      -- queued -> failed

INSERT INTO j SELECT 'e', (jobs.submit('inv_once')).id;
SELECT * FROM jobs.claim(pg_temp.id('e'), 'w1');
SELECT pg_temp.expire('e');
SELECT * FROM jobs.reap();                                                                -- processing -> failed (budget spent)

INSERT INTO j SELECT 'f', (jobs.submit('inv_t')).id;
SELECT * FROM jobs.claim(pg_temp.id('f'), 'w1');
SELECT jobs.cancel(pg_temp.id('f'));                                                      -- cancel requested
SELECT pg_temp.expire('f');
SELECT * FROM jobs.reap();                                                                -- processing -> failed (cancel honoured)

INSERT INTO j SELECT 'g', (jobs.submit('inv_t')).id;
SELECT jobs.mark_enqueue_failed(ARRAY[pg_temp.id('g')]);
SELECT jobs.cancel(pg_temp.id('g'));                                                      -- enqueue_failed -> failed

INSERT INTO j SELECT 'h', (jobs.submit('inv_t')).id;
SELECT * FROM jobs.claim(pg_temp.id('h'), 'w1');
SELECT jobs.fail(pg_temp.id('h'), 'w1', 1, 'x');
UPDATE jobs.job SET run_after = now() WHERE id = pg_temp.id('h');
SELECT * FROM jobs.claim(pg_temp.id('h'), 'w1');
SELECT jobs.fail(pg_temp.id('h'), 'w1', 3, 'x');
UPDATE jobs.job SET run_after = now() WHERE id = pg_temp.id('h');
SELECT * FROM jobs.claim(pg_temp.id('h'), 'w1');
SELECT jobs.fail(pg_temp.id('h'), 'w1', 5, 'x');
UPDATE jobs.job SET run_after = now() WHERE id = pg_temp.id('h');
SELECT * FROM jobs.claim(pg_temp.id('h'), 'w1');
SELECT jobs.fail(pg_temp.id('h'), 'w1', 7, 'x');                                          -- processing -> failed (exhausted)

INSERT INTO j SELECT 'coord', (jobs.fan_out('[{"kind": "inv_t"}]', '{"kind": "inv_t"}')).id;
INSERT INTO j SELECT 'kid', id FROM jobs.job WHERE parent_id = pg_temp.id('coord');
SELECT jobs.complete(pg_temp.id('kid'), 'w1', (SELECT lease_version FROM jobs.claim(pg_temp.id('kid'), 'w1')));
SELECT jobs.complete(pg_temp.id('coord'), 'w1', (SELECT lease_version FROM jobs.claim(pg_temp.id('coord'), 'w1')));

INSERT INTO j SELECT 'spent', (jobs.submit('inv_once')).id;
INSERT INTO j SELECT 'spent2', (jobs.submit('inv_once')).id;
SELECT jobs.mark_enqueue_failed(ARRAY[pg_temp.id('spent2')]);
UPDATE jobs.job SET retry_count = 5 WHERE id IN (pg_temp.id('spent'), pg_temp.id('spent2'));   -- a hand edit
SELECT * FROM jobs.reap();                                 -- queued / enqueue_failed -> failed (overspent)

-- Stale writers and duplicates are no-ops (§8.2, §8.4).
CREATE TEMP TABLE snap AS SELECT md5(string_agg(r::text, ',' ORDER BY r.id)) AS h, (SELECT count(*) FROM jobs.history) AS e FROM jobs.job AS r;
SELECT throws_ok(format($$ SELECT jobs.complete(%s, 'w2', 3, '{"stale": true}') $$, pg_temp.id('b')), 'JB001', NULL,
                 'invariants: the reaped worker''s late completion (stale lease_version 3) -> JB001');
SELECT throws_ok(format($$ SELECT jobs.complete(%s, 'w1', 1) $$, pg_temp.id('a')), 'JB001', NULL,
                 'invariants: a second completion of a done job -> JB001');
SELECT is_empty(format($$ SELECT * FROM jobs.claim(%s, 'w9') $$, pg_temp.id('b')), 'invariants: a duplicate signal for a running job claims nothing');
SELECT is(jobs.replay(pg_temp.id('a')), false, 'invariants: replay of a done job is a no-op (false)');
SELECT is((SELECT (md5(string_agg(r::text, ',' ORDER BY r.id)), (SELECT count(*) FROM jobs.history))::text FROM jobs.job AS r),
          (SELECT (h, e)::text FROM snap), 'invariants: stale writes, duplicate signals and replays of done jobs changed nothing');
SELECT jobs.complete(pg_temp.id('b'), 'w3', 5, '{"ok": "b"}');

-- The end state.
SELECT is(ARRAY(SELECT n || '=' || (SELECT status::text FROM jobs.job WHERE id = pg_temp.id(n))
                  FROM unnest(ARRAY['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'coord', 'kid', 'spent', 'spent2']) AS n),
          ARRAY['a=done', 'b=done', 'c=done', 'd=failed', 'e=failed', 'f=failed', 'g=failed', 'h=failed',
                'coord=done', 'kid=done', 'spent=failed', 'spent2=failed'],
          'invariants: no job is lost: every job reached done or failed');

-- The transition table of §2 (with the §3 reasons) as data.
CREATE TEMP TABLE allowed (from_status jobs.status, to_status jobs.status, reason text);
INSERT INTO allowed VALUES
    (NULL, 'queued', 'submitted'),
    ('queued', 'enqueue_failed', 'enqueue_failed'),
    ('enqueue_failed', 'queued', 'recovered'),
    ('queued', 'processing', 'claimed'),
    ('processing', 'done', 'completed'),
    ('processing', 'queued', 'retried'),
    ('processing', 'queued', 'reaped'),
    ('processing', 'failed', 'exhausted'),
    ('processing', 'failed', 'failed'),
    ('processing', 'failed', 'cancelled'),
    ('processing', 'processing', 'cancel_requested'),
    ('queued', 'failed', 'cancelled'),
    ('enqueue_failed', 'failed', 'cancelled'),
    ('queued', 'failed', 'exhausted'),
    ('enqueue_failed', 'failed', 'exhausted'),
    ('failed', 'queued', 'replayed');
CREATE TEMP VIEW ev AS
SELECT e.*, lag(e.to_status) OVER w AS prev_to, lag(e.lease_version) OVER w AS prev_lv,
       row_number() OVER w AS n, count(*) OVER (PARTITION BY e.job_id) AS total
  FROM jobs.history AS e
 WHERE e.job_id IN (SELECT id FROM j)
WINDOW w AS (PARTITION BY e.job_id ORDER BY e.id);

SELECT is_empty($$ SELECT job_id, from_status, to_status, reason FROM ev
                    EXCEPT SELECT ev.job_id, ev.from_status, ev.to_status, ev.reason FROM ev
                      JOIN allowed AS a ON a.from_status IS NOT DISTINCT FROM ev.from_status
                                       AND a.to_status = ev.to_status AND a.reason = ev.reason $$,
                'invariants: every event is a row of the transition table (from, to, reason)');
SELECT is((SELECT count(DISTINCT (a.from_status, a.to_status, a.reason)) FROM allowed AS a
             JOIN ev ON a.from_status IS NOT DISTINCT FROM ev.from_status AND a.to_status = ev.to_status AND a.reason = ev.reason),
          16::bigint, 'invariants: (fixture) the run exercised all 16 transitions');
SELECT is_empty($$ SELECT job_id FROM ev WHERE n = 1 AND (from_status IS NOT NULL OR reason <> 'submitted') $$,
                'invariants: every history starts with (new) -> queued, submitted');
SELECT is_empty($$ SELECT job_id, id FROM ev WHERE n > 1 AND from_status IS DISTINCT FROM prev_to $$,
                'invariants: every event starts where the previous one ended: each history is a path');
SELECT is_empty($$ SELECT ev.job_id FROM ev JOIN jobs.job AS r ON r.id = ev.job_id
                    WHERE ev.n = ev.total AND (ev.to_status <> r.status OR ev.lease_version <> r.lease_version) $$,
                'invariants: the last event matches the job''s status and lease_version');
SELECT is_empty($$ SELECT job_id, id FROM ev WHERE lease_version < prev_lv $$,
                'invariants: lease_version never decreases along a history');
SELECT is_empty($$ SELECT job_id, id, reason FROM ev
                    WHERE n > 1 AND (lease_version = prev_lv + 1) <> (reason IN ('claimed', 'retried', 'reaped', 'replayed')) $$,
                'invariants: lease_version grows by one on claim, retry, reap-requeue and replay, and only then');
SELECT is_empty($$ SELECT job_id FROM ev WHERE reason = 'completed' GROUP BY job_id HAVING count(*) > 1 $$,
                'invariants: at most one accepted completion per job');
SELECT is_empty($$ SELECT r.id FROM jobs.job AS r WHERE r.id IN (SELECT id FROM j)
                    AND (r.status IN ('done', 'failed')) <> (r.finished_at IS NOT NULL) $$,
                'invariants: finished_at is set exactly on done and failed jobs');
SELECT is_empty($$ SELECT ev.job_id FROM ev WHERE reason IN ('claimed', 'completed', 'retried', 'failed') AND worker IS NULL $$,
                'invariants: claims, completions and worker failures name the worker');
SELECT is((SELECT array_agg(retry_count ORDER BY id) FROM jobs.job WHERE id IN (pg_temp.id('b'), pg_temp.id('h'))), ARRAY[2, 4],
          'invariants: b was retried twice (fail, reap), h four times (budget 3 spent)');
SELECT is((SELECT lease_version FROM jobs.job WHERE id = pg_temp.id('c')), 3::bigint,
          'invariants: c: claim (1), replay (2), claim (3)');
SELECT is((SELECT count(*) FROM jobs.history WHERE job_id IN (SELECT id FROM j)),
          (SELECT count(*) FROM ev), 'invariants: (fixture) the view sees every event of the run');
SELECT is((SELECT count(*) FROM ev WHERE at <> now()), 0::bigint, 'invariants: events are stamped with now()');

SELECT * FROM finish();
ROLLBACK;
