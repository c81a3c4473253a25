-- Scoped idempotency keys (unique_while, unique_for) and debounce (docs/sql-api.md, "Scoped
-- keys and debounce"): when a key is free again, what a repeat changes, and what concurrent
-- submitters see. The concurrent part runs in two dblink sessions on committed rows of a
-- kind of its own, removed at the end.
BEGIN;
SELECT plan(60);
CREATE EXTENSION IF NOT EXISTS dblink;
SELECT jobs.define_type('us.k');
CREATE FUNCTION pg_temp.sub(key text, payload jsonb DEFAULT '{}', unique_while jobs.status[] DEFAULT NULL,
                            unique_for interval DEFAULT NULL, debounce text DEFAULT NULL,
                            run_after timestamptz DEFAULT NULL)
RETURNS jobs.job LANGUAGE sql AS $$
    SELECT * FROM jobs.submit('us.k', payload, key, run_after => run_after, unique_while => unique_while,
                              unique_for => unique_for, debounce => debounce)
$$;
CREATE FUNCTION pg_temp.finish(job_id bigint) RETURNS void LANGUAGE sql AS $$
    SELECT jobs.claim(job_id, 'w');
    SELECT jobs.complete(job_id, 'w', (SELECT lease_version FROM jobs.job WHERE id = job_id));
$$;

-- 1. The first release's rule stays the default: a key is the job's for its whole life.
SELECT pg_temp.sub('life');
SELECT pg_temp.finish((SELECT id FROM jobs.job WHERE idempotency_key = 'life'));
SELECT is((pg_temp.sub('life')).id, (SELECT min(id) FROM jobs.job WHERE idempotency_key = 'life'),
          'no scope: a repeat after the job is done returns the done job');
SELECT is((SELECT count(*) FROM jobs.job WHERE idempotency_key = 'life'), 1::bigint, 'no scope: one job per key, ever');

-- 2. unique_while: held in the named states only.
SELECT pg_temp.sub('w', '{"n": 1}', '{queued,processing}');
SELECT is((pg_temp.sub('w', '{"n": 2}', '{queued,processing}')).payload, '{"n": 1}'::jsonb,
          'unique_while queued, processing: a repeat while queued returns the job, unchanged');
SELECT jobs.claim((SELECT id FROM jobs.job WHERE idempotency_key = 'w'), 'w');
SELECT is((pg_temp.sub('w', '{"n": 3}', '{queued,processing}')).status, 'processing'::jobs.status,
          'unique_while: a repeat while processing returns the running job');
SELECT jobs.complete(id, 'w', lease_version) FROM jobs.job WHERE idempotency_key = 'w';
SELECT ok((SELECT created FROM jobs.insert_jobs('t', '[{"kind": "us.k", "idempotency_key": "w", "payload": {"n": 4}}]', NULL, false)),
          'unique_while: once the job is done the key is free, and a repeat creates a job');
SELECT is((SELECT array_agg(status ORDER BY id) FROM jobs.job WHERE idempotency_key = 'w'), '{done,queued}'::jobs.status[],
          'unique_while: the done job keeps its key beside the new one');
SELECT is((pg_temp.sub('w')).payload, '{"n": 4}'::jsonb,
          'a later repeat returns the job holding the key now (the new job, whose own scope is its lifetime)');
SELECT is((SELECT job_id FROM jobs.repeat_differences('[{"kind": "us.k", "idempotency_key": "w", "payload": {"n": 5}}]')),
          (SELECT max(id) FROM jobs.job WHERE idempotency_key = 'w'),
          'repeat_differences compares a repeat with the job holding the key, not the done one');

-- unique_while queued only: a running job does not hold the key (the recipe of docs/sql-api.md:
-- one waiting run at most, however many run).
SELECT pg_temp.sub('q', '{}', '{queued}');
SELECT jobs.claim((SELECT id FROM jobs.job WHERE idempotency_key = 'q'), 'w');
SELECT is((pg_temp.sub('q', '{}', '{queued}')).status, 'queued'::jobs.status,
          'unique_while queued: a repeat while the job runs queues a second one');
SELECT is((SELECT count(*) FROM jobs.job WHERE idempotency_key = 'q'), 2::bigint, 'unique_while queued: two jobs share the key');
SELECT is((pg_temp.sub('q', '{}', '{queued}')).id, (SELECT max(id) FROM jobs.job WHERE idempotency_key = 'q'),
          'unique_while queued: a third repeat meets the queued second');
SELECT lives_ok($$ SELECT jobs.fail(id, 'w', lease_version, 'boom') FROM jobs.job WHERE idempotency_key = 'q' AND status = 'processing' $$,
                'a retried job going back to queued beside the key''s new holder is no conflict (it left the scope for good)');
SELECT is((SELECT count(*) FROM jobs.job WHERE idempotency_key = 'q' AND status = 'queued'), 2::bigint,
          'both are queued; only the newer holds the key');

-- enqueue_failed is queued whose signal was lost: a scope holding queued holds it too.
SELECT is((pg_temp.sub('ef', '{}', '{queued}')).unique_states, '{queued,enqueue_failed}'::jobs.status[],
          'unique_while queued: the scope holds enqueue_failed too');
SELECT jobs.mark_enqueue_failed(ARRAY[(SELECT id FROM jobs.job WHERE idempotency_key = 'ef')]);
SELECT is((pg_temp.sub('ef', '{}', '{queued}')).id, (SELECT id FROM jobs.job WHERE idempotency_key = 'ef' AND status = 'enqueue_failed'),
          'a repeat while its job''s signal is lost (enqueue_failed) returns that job, not a second one');

-- 3. unique_for: held for a period from submission.
SELECT pg_temp.sub('p', '{"n": 1}', unique_for => '1 hour');
SELECT ok((SELECT unique_until BETWEEN now() + interval '59 minutes' AND now() + interval '1 hour' FROM jobs.job WHERE idempotency_key = 'p'),
          'unique_for: unique_until is submission plus the period');
SELECT is((pg_temp.sub('p', '{"n": 2}', unique_for => '1 hour')).payload, '{"n": 1}'::jsonb, 'unique_for: a repeat within the period returns the job');
UPDATE jobs.job SET unique_until = now() WHERE idempotency_key = 'p';
SELECT is((pg_temp.sub('p', '{"n": 3}', unique_for => '1 hour')).payload, '{"n": 3}'::jsonb,
          'unique_for: a repeat once the period ended (at exactly unique_until) creates a job');
SELECT is((SELECT unique_states FROM jobs.job WHERE idempotency_key = 'p' ORDER BY id LIMIT 1), '{}'::jobs.status[],
          'unique_for: the first job''s hold is released (unique_states {}), its row is otherwise untouched');
SELECT is((SELECT status FROM jobs.job WHERE idempotency_key = 'p' ORDER BY id LIMIT 1), 'queued'::jobs.status,
          'unique_for: the first job still runs: only the key moved on');
CREATE TEMP TABLE p2 AS
SELECT (r.job).id, r.created FROM jobs.insert_jobs('t', '[{"kind": "us.k", "idempotency_key": "p2", "unique_for": "1 hour"},
                                                      {"kind": "us.k", "idempotency_key": "p2", "unique_for": "1 hour"}]', NULL, false) AS r;
SELECT is((SELECT array_agg(created) FROM p2), ARRAY[true, false], 'a batch repeating a new key creates it once');
SELECT is((SELECT count(DISTINCT id) FROM p2), 1::bigint, 'a batch repeating a new key returns the one job twice');
SELECT is((SELECT unique_states FROM jobs.job WHERE idempotency_key = 'p2'), enum_range(NULL::jobs.status),
          'unique_for alone scopes every state');

-- 4. Debounce.
SELECT pg_temp.sub('d', '{"v": 1}');
SELECT is((pg_temp.sub('d', '{"v": 2}', debounce => 'payload')).payload, '{"v": 2}'::jsonb,
          'debounce payload: a repeat while queued replaces the payload');
SELECT is((SELECT created FROM jobs.insert_jobs('t', '[{"kind": "us.k", "idempotency_key": "d", "payload": {"v": 3}, "debounce": "payload"}]', NULL, false)),
          false, 'debounce: the repeat is no new job (created false)');
SELECT is((SELECT array_agg(reason || ':' || from_status || '>' || to_status || ':' || lease_version ORDER BY id)
             FROM jobs.history WHERE job_id = (SELECT id FROM jobs.job WHERE idempotency_key = 'd') AND from_status IS NOT NULL),
          ARRAY['debounced:queued>queued:0', 'debounced:queued>queued:0'],
          'debounce: each change is an event, queued -> queued, lease_version unchanged');
SELECT is((SELECT run_after FROM jobs.job WHERE idempotency_key = 'd') <= now(), true, 'debounce payload: run_after unchanged');

SELECT pg_temp.sub('r', '{"v": 1}', run_after => now() + interval '10 minutes');
SELECT is((pg_temp.sub('r', '{"v": 2}', debounce => 'run_after', run_after => now() + interval '20 minutes')).run_after,
          now() + interval '20 minutes', 'debounce run_after: a repeat pushes run_after to the repeat''s');
SELECT is((SELECT (payload, due_at) FROM jobs.job WHERE idempotency_key = 'r'), ('{"v": 1}'::jsonb, now() + interval '20 minutes'),
          'debounce run_after: the payload stays, due_at moves with run_after');
SELECT is((pg_temp.sub('r', '{}', debounce => 'run_after', run_after => now() + interval '5 minutes')).run_after,
          now() + interval '20 minutes', 'debounce run_after: an earlier run_after never pulls the job forward');
SELECT is((pg_temp.sub('r', '{}', debounce => 'run_after')).run_after, now() + interval '20 minutes',
          'debounce run_after: a repeat without run_after (now) leaves a later run_after');

SELECT pg_temp.sub('b', '{"v": 1}');
SELECT is((SELECT (payload, run_after) FROM pg_temp.sub('b', '{"v": 2}', debounce => 'payload_and_run_after',
                                                        run_after => now() + interval '1 minute')),
          ('{"v": 2}'::jsonb, now() + interval '1 minute'), 'debounce payload_and_run_after: both');
SELECT is(ARRAY(SELECT (r.job).payload FROM jobs.insert_jobs('t', '[{"kind": "us.k", "idempotency_key": "b", "payload": {"v": 3}, "debounce": "payload"},
                                                                   {"kind": "us.k", "idempotency_key": "b", "payload": {"v": 4}, "debounce": "payload"}]', NULL, false) AS r),
          ARRAY['{"v": 4}'::jsonb, '{"v": 4}'::jsonb], 'a batch repeating a key twice acts as its last repeat');
SELECT is((SELECT count(*) FROM jobs.history WHERE job_id = (SELECT id FROM jobs.job WHERE idempotency_key = 'b') AND reason = 'debounced'),
          2::bigint, 'one debounced event per repeating call, not per spec');

SELECT pg_temp.sub('dp', '{"v": 1}');
SELECT jobs.claim((SELECT id FROM jobs.job WHERE idempotency_key = 'dp'), 'w');
SELECT is((pg_temp.sub('dp', '{"v": 2}', debounce => 'payload')).payload, '{"v": 1}'::jsonb,
          'debounce: a running job is not changed; the repeat returns it');
SELECT is((SELECT count(*) FROM jobs.history WHERE job_id = (SELECT id FROM jobs.job WHERE idempotency_key = 'dp') AND reason = 'debounced'),
          0::bigint, 'debounce: no event for a job it did not change');
SELECT is_empty($$ SELECT * FROM jobs.repeat_differences('[{"kind": "us.k", "idempotency_key": "dp", "payload": {"v": 9}, "debounce": "payload"}]') $$,
                'repeat_differences never reports a debounced repeat (it differs on purpose)');

-- 5. Bad input: 22023, nothing written.
SELECT throws_ok($$ SELECT pg_temp.sub(NULL, unique_for => '1 hour') $$, '22023', 'jobs.submit: unique_while, unique_for and debounce need an idempotency_key',
                 'a scope without a key: 22023');
SELECT throws_ok($$ SELECT jobs.submit_many('[{"kind": "us.k", "debounce": "payload"}]') $$, '22023', NULL, 'a debounce without a key: 22023');
SELECT throws_ok($$ SELECT pg_temp.sub('x', unique_while => '{processing}') $$, '22023', NULL, 'unique_while without queued: 22023');
SELECT throws_ok($$ SELECT pg_temp.sub('x', unique_while => '{}') $$, '22023', NULL, 'an empty unique_while: 22023');
SELECT throws_ok($$ SELECT jobs.submit_many('[{"kind": "us.k", "idempotency_key": "x", "unique_while": ["queued", "waiting"]}]') $$, '22023', NULL,
                 'an unknown state in unique_while: 22023');
SELECT throws_ok($$ SELECT jobs.submit_many('[{"kind": "us.k", "idempotency_key": "x", "unique_while": "queued"}]') $$, '22023', NULL,
                 'unique_while that is not a list: 22023');
SELECT throws_ok($$ SELECT jobs.submit_many('[{"kind": "us.k", "idempotency_key": "x", "unique_for": "soon"}]') $$, '22023',
                 'jobs.submit_many: specs[0]: unique_for must be a positive interval of at most 100 years, got "soon"', 'a unique_for that is no interval: 22023');
SELECT throws_ok($$ SELECT pg_temp.sub('x', unique_for => '-1 hour') $$, '22023', NULL, 'a negative unique_for: 22023');
SELECT throws_ok($$ SELECT jobs.submit_many('[{"kind": "us.k", "idempotency_key": "x", "unique_for": 3600}]') $$, '22023', NULL, 'a unique_for number: 22023');
SELECT throws_ok($$ SELECT pg_temp.sub('x', debounce => 'latest') $$, '22023', NULL, 'an unknown debounce mode: 22023');
SELECT is((SELECT count(*) FROM jobs.job WHERE idempotency_key = 'x'), 0::bigint, 'bad input wrote nothing');
SELECT is((SELECT count(*) FROM jobs.audit() WHERE violations > 0), 0::bigint, 'the history of all of it passes jobs.audit');

-- 6. Concurrent submitters, in sessions of their own (committed rows, which this session's
-- statements see as they commit).
SELECT dblink_connect('us_a', 'dbname=' || current_database());
SELECT dblink_connect('us_b', 'dbname=' || current_database());
CREATE FUNCTION pg_temp.on(conn text, query text) RETURNS text LANGUAGE sql AS $$
    SELECT x FROM dblink(conn, query) AS t(x text)
$$;
SELECT pg_temp.on('us_a', $$ SELECT jobs.define_type('us.c')::text $$);
-- The answer of a query sent ahead (dblink_send_query), once it is there; the empty result
-- that ends it is read too, so the connection takes the next query.
CREATE FUNCTION pg_temp.later(conn text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    answer text;
BEGIN
    SELECT x INTO answer FROM dblink_get_result(conn) AS t(x text);
    PERFORM * FROM dblink_get_result(conn) AS t(x text);
    RETURN answer;
END $$;

-- Two submitters repeating a key whose period ended: the first releases and re-takes it, the
-- second waits on the first's row lock and insert, then returns the first one's new job.
SELECT pg_temp.on('us_a', $$ SELECT id::text FROM jobs.submit('us.c', '{}', 'c1', unique_for => '1 hour') $$);
SELECT dblink_exec('us_a', $$ UPDATE jobs.job SET unique_until = now() - interval '1 second' WHERE kind = 'us.c' AND idempotency_key = 'c1' $$);
SELECT dblink_exec('us_a', 'BEGIN');
SELECT pg_temp.on('us_a', $$ SELECT id FROM jobs.submit('us.c', '{"by": "a"}', 'c1', unique_for => '1 hour') $$) AS a_id \gset
SELECT dblink_send_query('us_b', $$ SELECT id FROM jobs.submit('us.c', '{"by": "b"}', 'c1', unique_for => '1 hour') $$);
SELECT dblink_exec('us_a', 'COMMIT');
SELECT is(pg_temp.later('us_b'), :'a_id', 'two submitters after the period: the second gets the first one''s new job');
SELECT is((SELECT count(*) FROM jobs.job WHERE kind = 'us.c' AND idempotency_key = 'c1'), 2::bigint, 'two submitters: one new job, not two');

-- Two debouncers: the second waits for the first's row lock, then applies over it.
SELECT pg_temp.on('us_a', $$ SELECT id::text FROM jobs.submit('us.c', '{"v": 0}', 'c2') $$);
SELECT dblink_exec('us_a', 'BEGIN');
SELECT pg_temp.on('us_a', $$ SELECT payload::text FROM jobs.submit('us.c', '{"v": 1}', 'c2', debounce => 'payload') $$);
SELECT dblink_send_query('us_b', $$ SELECT payload::text FROM jobs.submit('us.c', '{"v": 2}', 'c2', debounce => 'payload') $$);
SELECT dblink_exec('us_a', 'COMMIT');
SELECT is(pg_temp.later('us_b'), '{"v": 2}', 'two debouncers: the later one''s payload is the job''s');
SELECT is((SELECT count(*) FROM jobs.history e JOIN jobs.job j ON j.id = e.job_id
            WHERE j.kind = 'us.c' AND j.idempotency_key = 'c2' AND e.reason = 'debounced'), 2::bigint,
          'two debouncers: both changes are in the history');

-- A claim that holds the job first wins over a debounce: the job runs as claimed.
SELECT pg_temp.on('us_a', $$ SELECT id::text FROM jobs.submit('us.c', '{"v": 0}', 'c3') $$);
SELECT dblink_exec('us_a', 'BEGIN');
SELECT pg_temp.on('us_a', $$ SELECT count(*)::text FROM jobs.claim((SELECT id FROM jobs.job WHERE kind = 'us.c' AND idempotency_key = 'c3'), 'w') $$);
SELECT dblink_send_query('us_b', $$ SELECT status || ' ' || payload::text FROM jobs.submit('us.c', '{"v": 1}', 'c3', debounce => 'payload') $$);
SELECT dblink_exec('us_a', 'COMMIT');
SELECT is(pg_temp.later('us_b'), 'processing {"v": 0}', 'a debounce behind a claim returns the running job, unchanged');

-- A claim moving the holder out of its states while a repeat submits: the repeat waits for
-- the claim, then releases the old job for good, so its retry does not meet the new holder.
-- The claim commits only once the repeat is seen waiting on it (a poll with a deadline), or
-- the repeat would simply start after the claim.
CREATE FUNCTION pg_temp.await_lock_wait(marker text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    FOR i IN 1..2000 LOOP
        PERFORM pg_stat_clear_snapshot();
        IF EXISTS (SELECT FROM pg_stat_activity
                    WHERE wait_event_type = 'Lock' AND query LIKE '%' || marker || '%' AND pid <> pg_backend_pid()) THEN
            RETURN true;
        END IF;
        PERFORM pg_sleep(0.005);
    END LOOP;
    RETURN false;
END $$;
SELECT pg_temp.on('us_a', $$ SELECT id::text FROM jobs.submit('us.c', '{}', 'c4', unique_while => '{queued}') $$) AS c4_old \gset
SELECT dblink_exec('us_a', 'BEGIN');
SELECT pg_temp.on('us_a', format($$ SELECT count(*)::text FROM jobs.claim(%s, 'w') $$, :'c4_old'));
SELECT dblink_send_query('us_b', $$ SELECT id::text FROM jobs.submit('us.c', '{"repeat": "c4"}', 'c4', unique_while => '{queued}') $$);
SELECT ok(pg_temp.await_lock_wait('"repeat": "c4"'), 'a repeat behind a claim of its key''s holder waits for the claim');
SELECT dblink_exec('us_a', 'COMMIT');
SELECT isnt(pg_temp.later('us_b'), :'c4_old', 'a repeat behind a claim that took the holder out of its states takes the key');
SELECT is((SELECT unique_states FROM jobs.job WHERE id = :'c4_old'), '{}'::jobs.status[],
          'a repeat behind a claim releases the claimed job for good');
SELECT is(pg_temp.on('us_a', format($$ SELECT status::text FROM jobs.fail(%s, 'w', (SELECT lease_version FROM jobs.job WHERE id = %1$s), 'boom') $$, :'c4_old')),
          'queued', 'the released job''s retry goes back to queued beside the key''s new holder');
SELECT is((SELECT count(*) FROM jobs.job WHERE kind = 'us.c' AND idempotency_key = 'c4' AND status = 'queued'), 2::bigint,
          'two queued jobs share the key, one of them released');

SELECT is((SELECT count(*) FROM jobs.audit() WHERE violations > 0), 0::bigint, 'the concurrent histories pass jobs.audit');
SELECT * FROM finish();

-- Leave nothing of the kind behind for the files after this one.
SELECT dblink_exec('us_a', $$ DELETE FROM jobs.event WHERE job_id IN (SELECT id FROM jobs.job WHERE kind = 'us.c') $$);
SELECT dblink_exec('us_a', $$ DELETE FROM jobs.job WHERE kind = 'us.c' $$);
SELECT dblink_exec('us_a', $$ DELETE FROM jobs.metric_minute WHERE kind = 'us.c' $$);
SELECT dblink_exec('us_a', $$ DELETE FROM jobs.job_type WHERE kind = 'us.c' $$);
SELECT dblink_disconnect('us_a');
SELECT dblink_disconnect('us_b');
ROLLBACK;
