-- jobs.submit_many: all or nothing, errors naming specs[i], results in input order, repeated
-- and duplicate idempotency keys, unknown spec keys rejected (docs/design.md §4, decisions "Names and input").
BEGIN;
SELECT plan(53);

SELECT jobs.define_type('sm_a', queue => 'sm_q');
SELECT jobs.define_type('sm_b');
SELECT jobs.define_type('sm_small', max_payload_bytes => 20);

CREATE TEMP VIEW counts AS
SELECT (SELECT count(*) FROM jobs.job) AS jobs_n, (SELECT count(*) FROM jobs.history) AS events_n,
       (SELECT md5(coalesce(string_agg(j::text, ',' ORDER BY j.id), '')) FROM jobs.job AS j) AS jobs_md5;

-- a batch.
CREATE TEMP TABLE b1 AS
SELECT r.*, row_number() OVER () AS pos
  FROM jobs.submit_many('[{"kind": "sm_b", "payload": {"n": 0}},
                          {"kind": "sm_a", "payload": {"n": 1}, "ordering_key": "acct:1"},
                          {"kind": "sm_b", "payload": {"n": 2}, "run_after": "2999-01-01T00:00:00Z", "notify": false}]') AS r;
SELECT is((SELECT count(*) FROM b1), 3::bigint, 'submit_many: three specs -> three jobs');
SELECT is(ARRAY(SELECT (payload ->> 'n')::int FROM b1 ORDER BY pos), ARRAY[0, 1, 2], 'submit_many: results come back in input order');
SELECT is(ARRAY(SELECT kind || '/' || queue FROM b1 ORDER BY pos), ARRAY['sm_b/default', 'sm_a/sm_q', 'sm_b/default'],
          'submit_many: each job gets its own kind and that kind''s queue');
SELECT is(ARRAY(SELECT DISTINCT status::text FROM jobs.job WHERE id IN (SELECT id FROM b1)), ARRAY['queued'],
          'submit_many: every job is queued');
SELECT is((SELECT count(*) FROM jobs.history WHERE job_id IN (SELECT id FROM b1) AND reason = 'submitted'
             AND from_status IS NULL AND to_status = 'queued'), 3::bigint,
          'submit_many: one submitted event per job');
SELECT is((SELECT ordering_key FROM b1 WHERE pos = 2), 'acct:1', 'submit_many: a spec''s ordering_key is stored');
SELECT is((SELECT run_after FROM b1 WHERE pos = 3), '2999-01-01T00:00:00Z'::timestamptz, 'submit_many: a spec''s run_after is stored');

-- an empty batch; repeated keys keep input order.
SELECT is_empty($$ SELECT * FROM jobs.submit_many('[]') $$, 'submit_many: [] -> zero rows, no error');
CREATE TEMP TABLE first_keyed AS SELECT * FROM jobs.submit('sm_a', '{"v": "first"}', 'sm-key-1');
CREATE TEMP TABLE b2 AS
SELECT r.*, row_number() OVER () AS pos
  FROM jobs.submit_many('[{"kind": "sm_b", "payload": {"v": "new-0"}},
                          {"kind": "sm_a", "payload": {"v": "repeat"}, "idempotency_key": "sm-key-1"},
                          {"kind": "sm_b", "payload": {"v": "new-2"}}]') AS r;
SELECT is((SELECT id FROM b2 WHERE pos = 2), (SELECT id FROM first_keyed),
          'submit_many: a repeated key returns the existing job at its input position');
SELECT is((SELECT payload FROM b2 WHERE pos = 2), '{"v": "first"}'::jsonb, 'submit_many: ... unchanged (first payload)');
SELECT ok((SELECT id FROM b2 WHERE pos = 1) > (SELECT id FROM b2 WHERE pos = 2)
          AND (SELECT id FROM b2 WHERE pos = 3) > (SELECT id FROM b2 WHERE pos = 1),
          'submit_many: input order, not id order (new, existing older job, new)');

-- duplicate keys within one batch.
CREATE TEMP TABLE c_dup AS SELECT * FROM counts;
CREATE TEMP TABLE b3 AS
SELECT r.*, row_number() OVER () AS pos
  FROM jobs.submit_many('[{"kind": "sm_a", "payload": {"d": 1}, "idempotency_key": "dup"},
                          {"kind": "sm_a", "payload": {"d": 2}, "idempotency_key": "dup"},
                          {"kind": "sm_b", "payload": {"d": 3}, "idempotency_key": "dup"}]') AS r;
SELECT is((SELECT count(*) FROM b3), 3::bigint, 'submit_many: a batch with a duplicate key still returns one row per spec');
SELECT is((SELECT id FROM b3 WHERE pos = 2), (SELECT id FROM b3 WHERE pos = 1),
          'submit_many: the duplicate key within the batch returns the job created by its first occurrence');
SELECT is((SELECT payload FROM b3 WHERE pos = 2), '{"d": 1}'::jsonb, 'submit_many: ... with the first occurrence''s payload');
SELECT isnt((SELECT id FROM b3 WHERE pos = 3), (SELECT id FROM b3 WHERE pos = 1),
            'submit_many: the same key under another kind in the batch is a different job');
SELECT is((SELECT (n.jobs_n - c.jobs_n, n.events_n - c.events_n)::text FROM counts AS n, c_dup AS c), '(2,2)',
          'submit_many: the duplicate created no second job and no second event');

-- one bad element -> error naming it, nothing inserted.
CREATE TEMP TABLE c_bad AS SELECT * FROM counts;
SELECT throws_ok($$ SELECT * FROM jobs.submit_many('[{"kind": "sm_a"}, {"kind": "sm_a"}, {"kind": "sm_a", "payload": [1]}]') $$,
                 '22023', NULL, 'submit_many: a non-object payload in the third spec -> 22023');
SELECT throws_like($$ SELECT * FROM jobs.submit_many('[{"kind": "sm_a"}, {"kind": "sm_a"}, {"kind": "sm_a", "payload": [1]}]') $$,
                   '%specs[2]%', 'submit_many: ... the error names specs[2]');
SELECT throws_ok($$ SELECT * FROM jobs.submit_many('[{"kind": "sm_a"}, {"kind": "sm_nope"}]') $$,
                 'JB005', NULL, 'submit_many: an unknown kind in the second spec -> JB005');
SELECT throws_like($$ SELECT * FROM jobs.submit_many('[{"kind": "sm_a"}, {"kind": "sm_nope"}]') $$,
                   '%specs[1]%sm_nope%', 'submit_many: ... the error names specs[1] and the kind');
SELECT throws_ok($$ SELECT * FROM jobs.submit_many('[{"kind": "sm_small", "payload": {"a": "xxxxxxxxxxx"}},
                                                     {"kind": "sm_small", "payload": {"a": "xxxxxxxxxxxx"}}]') $$,
                 'JB004', NULL, 'submit_many: the second payload one byte over the limit -> JB004 (the first, at the limit, rolls back too)');
SELECT throws_like($$ SELECT * FROM jobs.submit_many('[{"kind": "sm_small", "payload": {"a": "xxxxxxxxxxx"}},
                                                       {"kind": "sm_small", "payload": {"a": "xxxxxxxxxxxx"}}]') $$,
                   '%specs[1]%', 'submit_many: ... the JB004 error names specs[1]');
SELECT throws_ok($$ SELECT * FROM jobs.submit_many('[{"kind": "sm_a", "payolad": {}}]') $$,
                 '22023', NULL, 'submit_many: an unknown key (typo payolad) -> 22023');
SELECT throws_like($$ SELECT * FROM jobs.submit_many('[{"kind": "sm_a"}, {"kind": "sm_a", "urgency": 1}]') $$,
                   '%specs[1]%urgency%', 'submit_many: the unknown-key error names specs[1] and the key');
SELECT throws_ok($$ SELECT * FROM jobs.submit_many('[{"kind": "sm_a"}, 42]') $$, '22023', NULL,
                 'submit_many: an element that is not an object -> 22023');
SELECT throws_like($$ SELECT * FROM jobs.submit_many('[{"kind": "sm_a"}, 42]') $$, '%specs[1]%',
                   'submit_many: ... naming specs[1]');
SELECT throws_ok($$ SELECT * FROM jobs.submit_many('[{"payload": {}}]') $$, '22023', NULL, 'submit_many: a spec without kind -> 22023');
SELECT throws_ok($$ SELECT * FROM jobs.submit_many('[{"kind": "sm_a", "run_after": "not a time"}]') $$, '22023', NULL,
                 'submit_many: a run_after that is not a timestamp -> 22023');
SELECT throws_ok($$ SELECT * FROM jobs.submit_many('[{"kind": "sm_a", "idempotency_key": 5}]') $$, '22023', NULL,
                 'submit_many: a non-string idempotency_key -> 22023');
SELECT throws_ok($$ SELECT * FROM jobs.submit_many('[{"kind": "sm_a", "idempotency_key": ""}]') $$, '22023', NULL,
                 'submit_many: an empty idempotency_key -> 22023');
SELECT throws_ok($$ SELECT * FROM jobs.submit_many('[{"kind": "sm_a", "notify": "yes"}]') $$, '22023', NULL,
                 'submit_many: a non-boolean notify -> 22023');
SELECT throws_ok($$ SELECT * FROM jobs.submit_many('{"kind": "sm_a"}') $$, '22023', NULL, 'submit_many: an object instead of an array -> 22023');
SELECT throws_ok($$ SELECT * FROM jobs.submit_many(NULL) $$, '22023', NULL, 'submit_many: NULL specs -> 22023');
SELECT throws_ok($$ SELECT * FROM jobs.submit_many('[{"kind": "sm_a", "idempotency_key": "new-key"}, {"kind": "sm_a", "payload": 1}]') $$,
                 '22023', NULL, 'submit_many: a bad second spec after a keyed first one -> 22023');
SELECT is((SELECT (jobs_n, events_n, jobs_md5)::text FROM counts), (SELECT (jobs_n, events_n, jobs_md5)::text FROM c_bad),
          'submit_many: every rejected batch changed nothing (no job, no event, no row modified)');
SELECT is((SELECT count(*) FROM jobs.job WHERE idempotency_key = 'new-key'), 0::bigint,
          'submit_many: the keyed job of the rejected batch does not exist');

-- notify false / default both work; the result rows are the stored rows.
SELECT is((SELECT count(*) FROM jobs.submit_many('[{"kind": "sm_a", "notify": false}, {"kind": "sm_a", "notify": true}, {"kind": "sm_a"}]')),
          3::bigint, 'submit_many: notify false, true and absent are all accepted');
SELECT is((SELECT count(*) FROM b1 JOIN jobs.job AS j ON j.id = b1.id AND (b1.payload, b1.status, b1.run_after) = (j.payload, j.status, j.run_after)),
          3::bigint, 'submit_many: returned rows match the stored rows');
SELECT is((SELECT payload FROM jobs.submit_many('[{"kind": "sm_a", "payload": null}]')), '{}'::jsonb,
          'submit_many: a null payload is stored as {}');

-- The hot path parses a run_after once, and never enters the parser for specs without one:
-- each call of parse_timestamptz is a subtransaction (its exception block), and calling it
-- for every spec cost submit_many a sixth of its time (docs/performance.md).
SET track_functions = 'all';
SELECT count(*) FROM jobs.submit_many('[{"kind": "sm_a", "notify": false}, {"kind": "sm_a", "notify": false}]');
SELECT is(pg_stat_get_xact_function_calls('jobs.parse_timestamptz(text)'::regprocedure), NULL::bigint,
          'submit_many: specs without run_after never call parse_timestamptz');
SELECT count(*) FROM jobs.submit_many('[{"kind": "sm_a", "notify": false, "run_after": "2999-01-01T00:00:00Z"}, {"kind": "sm_a", "notify": false}]');
SELECT is(pg_stat_get_xact_function_calls('jobs.parse_timestamptz(text)'::regprocedure), 1::bigint,
          'submit_many: a spec with run_after is parsed once (by the validation; the insert casts)');
RESET track_functions;

-- The validation skips the rules about optional keys for a spec that holds none of them (a
-- kind and a payload, with or without notify): the list it tests must be every accepted key
-- but those three, or a bad value under a key left out would be stored unchecked.
SELECT is((SELECT ARRAY(SELECT k FROM unnest(substring(p.prosrc FROM $re$e\.spec - '(\{[a-z_,]+\})'::text\[\]$re$)::text[]) AS k
                         WHERE k NOT IN ('kind', 'payload', 'notify') ORDER BY k)
             FROM pg_catalog.pg_proc AS p WHERE p.oid = 'jobs.insert_job_rows'::regproc),
          (SELECT ARRAY(SELECT k FROM unnest(substring(p.prosrc FROM $re$e\.spec \?\| '(\{[a-z_,]+\})'::text\[\]$re$)::text[]) AS k
                         ORDER BY k)
             FROM pg_catalog.pg_proc AS p WHERE p.oid = 'jobs.insert_job_rows'::regproc),
          'submit_many: the keys whose rules a spec can skip are every accepted key but kind, payload and notify');
-- ...and each of them, alone beside a kind, is still checked: an object is no valid value for any.
SELECT throws_ok(format('SELECT * FROM jobs.submit_many(%L)', jsonb_build_array(jsonb_build_object('kind', 'sm_a', k, '{}'::jsonb))),
                 '22023', NULL, format('submit_many: a spec with only kind and %s (an object) -> 22023', k))
  FROM unnest('{idempotency_key,ordering_key,concurrency_key,run_after,priority,unique_while,unique_for,debounce,traceparent,depends_on,on_dependency_failure}'::text[]) AS k;

SELECT * FROM finish();
ROLLBACK;
