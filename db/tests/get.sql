-- jobs.get: the stored row of one job at every stage; JB002 (with message and HINT) when unknown.
BEGIN;
SELECT plan(13);

SELECT jobs.define_type('get_t', queue => 'get_q');
CREATE TEMP TABLE j AS SELECT * FROM jobs.submit('get_t', '{"doc": 7}', 'get-key', ordering_key => 'get:1');
CREATE FUNCTION pg_temp.jid() RETURNS bigint LANGUAGE sql AS $$ SELECT id FROM j $$;
-- SQLSTATE, message and hint of a failing statement.
CREATE FUNCTION pg_temp.error_of(stmt text) RETURNS text[] LANGUAGE plpgsql AS $$
DECLARE st text; msg text; hint text;
BEGIN
    EXECUTE stmt;
    RETURN NULL;
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, hint = PG_EXCEPTION_HINT;
    RETURN ARRAY[st, msg, hint];
END $$;

SELECT is((SELECT g::text FROM jobs.get(pg_temp.jid()) AS g), (SELECT r::text FROM jobs.job AS r WHERE r.id = pg_temp.jid()),
          'get: a queued job -> its stored row, every column');
SELECT is((SELECT (kind, queue, payload, status, idempotency_key, ordering_key, lease_version)::text FROM jobs.get(pg_temp.jid())),
          ('get_t', 'get_q', '{"doc": 7}'::jsonb, 'queued'::jobs.status, 'get-key', 'get:1', 0::bigint)::text,
          'get: kind, queue, payload, status queued, keys and lease_version 0');
SELECT jobs.claim(pg_temp.jid(), 'worker-1');
SELECT is((SELECT (status, owned_by, lease_version, claimed_at, lease_expires_at)::text FROM jobs.get(pg_temp.jid())),
          ('processing'::jobs.status, 'worker-1', 1::bigint, now(), now() + interval '15 seconds')::text,
          'get: a claimed job -> processing, owner, lease_version 1, claimed now, lease 15 s');
SELECT jobs.complete(pg_temp.jid(), 'worker-1', 1, '{"pages": 3}');
SELECT is((SELECT (status, result, finished_at, lease_version)::text FROM jobs.get(pg_temp.jid())),
          ('done'::jobs.status, '{"pages": 3}'::jsonb, now(), 1::bigint)::text,
          'get: a completed job -> done with its result, finished now');
SELECT is((SELECT g::text FROM jobs.get(pg_temp.jid()) AS g), (SELECT r::text FROM jobs.job AS r WHERE r.id = pg_temp.jid()),
          'get: a done job -> its stored row, every column');

-- Read-only.
CREATE TEMP TABLE snap AS SELECT md5(string_agg(r::text, ',' ORDER BY r.id)) AS h, (SELECT count(*) FROM jobs.history) AS e FROM jobs.job AS r;
SELECT jobs.get(pg_temp.jid());
SELECT is((SELECT (md5(string_agg(r::text, ',' ORDER BY r.id)), (SELECT count(*) FROM jobs.history))::text FROM jobs.job AS r),
          (SELECT (h, e)::text FROM snap), 'get: reading changes no job and logs no event');

-- Unknown ids.
SELECT throws_ok($$ SELECT jobs.get(-1) $$, 'JB002', NULL, 'get: unknown id -> JB002');
SELECT throws_ok(format('SELECT jobs.get(%s)', (SELECT max(id) + 1000 FROM jobs.job)), 'JB002', NULL,
                 'get: an id past the last job -> JB002');
SELECT is((pg_temp.error_of('SELECT jobs.get(-1)'))[1], 'JB002', 'get: (helper) the error is JB002');
SELECT ok((pg_temp.error_of('SELECT jobs.get(-1)'))[2] LIKE '%jobs.get%-1%', 'get: the JB002 message names the function and the id');
SELECT ok(coalesce((pg_temp.error_of('SELECT jobs.get(-1)'))[3], '') <> '', 'get: the JB002 error carries a HINT');
SELECT is((SELECT (md5(string_agg(r::text, ',' ORDER BY r.id)), (SELECT count(*) FROM jobs.history))::text FROM jobs.job AS r),
          (SELECT (h, e)::text FROM snap), 'get: the failed reads changed nothing');

-- A pruned job no longer exists.
UPDATE jobs.job SET finished_at = now() - interval '30 days' WHERE id = pg_temp.jid();
SELECT jobs.prune('7 days');
SELECT throws_ok(format('SELECT jobs.get(%s)', pg_temp.jid()), 'JB002', NULL, 'get: a pruned job -> JB002');

SELECT * FROM finish();
ROLLBACK;
