-- Per-key concurrency and fair claiming (docs/sql-api.md "Per-key concurrency and fair
-- claiming"): define_type's max_running_per_key, the spec key concurrency_key, the bound
-- enforced by claim_many and claim_next (the most urgent of a key first), jobs.held_back for
-- the jobs a key's bound held back, and claim_next's turns between the keys of a queue. The
-- concurrent case (several sessions racing for one key) is py/tests/test_concurrency_keys.py.
BEGIN;
SELECT plan(32);

-- validation
SELECT throws_ok($$ SELECT jobs.define_type('ck.bad', max_running_per_key => 0) $$, '22023',
                 'jobs.define_type: max_running_per_key must be NULL (no bound per key) or at least 1',
                 'max_running_per_key below 1 is 22023');
SELECT is((jobs.define_type('ck.t', queue => 'ck.q', max_running_per_key => 2)).max_running_per_key, 2,
          'define_type keeps max_running_per_key');
SELECT results_eq($$ SELECT kind, max_running, max_running_per_key FROM jobs.kind_limit WHERE kind LIKE 'ck.%' $$,
                  $$ VALUES ('ck.t'::text, NULL::integer, 2) $$,
                  'a kind bounded per key only is a limited kind: its row in jobs.kind_limit');
SELECT count(*) AS jobs_before FROM jobs.job \gset
SELECT throws_ok($$ SELECT jobs.submit('ck.t', concurrency_key => '') $$, '22023',
                 'jobs.submit: concurrency_key must be a string of 1 to 200 characters or null, got ""',
                 'an empty concurrency_key is 22023');
SELECT throws_ok(format($$ SELECT jobs.submit('ck.t', concurrency_key => %L) $$, repeat('k', 201)), '22023', NULL,
                 'a concurrency_key over 200 characters is 22023');
SELECT throws_ok($$ SELECT jobs.submit_many('[{"kind": "ck.t", "concurrency_key": 42}]') $$, '22023', NULL,
                 'a concurrency_key that is no string is 22023');
SELECT is((SELECT count(*) FROM jobs.job), :jobs_before::bigint, 'refused specs wrote nothing');
SELECT is((jobs.submit('ck.t', '{"n": 0}', concurrency_key => 'tenant:0')).concurrency_key, 'tenant:0',
          'jobs.submit keeps the concurrency_key');
SELECT id AS t0 FROM jobs.job WHERE concurrency_key = 'tenant:0' \gset

-- The bound at claim: 4 jobs of key a (the last most urgent), 3 of key b, 2 without a key.
CREATE TEMP TABLE ck (name text PRIMARY KEY, id bigint NOT NULL);
INSERT INTO ck SELECT 'a' || n, (jobs.submit('ck.t', jsonb_build_object('n', n), concurrency_key => 'a',
                                              priority => CASE WHEN n = 4 THEN 0 ELSE 5 END)).id
  FROM generate_series(1, 4) AS n;
INSERT INTO ck SELECT 'b' || n, (jobs.submit('ck.t', jsonb_build_object('n', n), concurrency_key => 'b')).id
  FROM generate_series(1, 3) AS n;
INSERT INTO ck SELECT 'u' || n, (jobs.submit('ck.t', jsonb_build_object('n', n))).id FROM generate_series(1, 2) AS n;
CREATE FUNCTION pg_temp.id_of(text) RETURNS bigint LANGUAGE sql AS $$ SELECT c.id FROM ck AS c WHERE c.name = $1 $$;
CREATE FUNCTION pg_temp.ids(text[]) RETURNS bigint[] LANGUAGE sql AS $$
    SELECT array_agg(c.id ORDER BY c.id) FROM ck AS c WHERE c.name = ANY ($1)
$$;
SELECT is((SELECT array_agg(l.job_id ORDER BY l.job_id)
             FROM jobs.claim_many(pg_temp.ids('{a1,a2,a3,a4,b1,b2,b3,u1,u2}'), 'w') AS l),
          pg_temp.ids('{a1,a4,b1,b2,u1,u2}'),
          'claim_many grants at most max_running_per_key of each key, the most urgent first; jobs without a key are not bounded');
SELECT is((SELECT count(*) FROM jobs.kind_slot WHERE kind = 'ck.t' AND concurrency_key = 'a'), 2::bigint,
          'each lease of a key holds a slot that names it');
SELECT is_empty($$ SELECT * FROM jobs.claim_many(pg_temp.ids('{a2,a3,b3}'), 'w') $$,
                'a key at its bound gets no more');
SELECT results_eq($$ SELECT h.job_id FROM jobs.held_back(pg_temp.ids('{a2,a3,b3}')) AS h ORDER BY h.job_id $$,
                  $$ SELECT unnest(pg_temp.ids('{a2,a3,b3}')) $$,
                  'jobs.held_back names the jobs a key''s bound held back');
SELECT ok((SELECT bool_and(h.run_after BETWEEN now() + interval '200 milliseconds' AND now() + interval '10 seconds')
             FROM jobs.held_back(pg_temp.ids('{a2,a3,b3}')) AS h),
          '... to be pushed again within 10 s');
SELECT is((SELECT h.run_after FROM jobs.held_back(pg_temp.ids('{a2,a3}')) AS h WHERE h.job_id = pg_temp.id_of('a3')), now() + interval '1 second',
          '... a second apart per max_running_per_key jobs ahead in the key');
-- A finished lease frees its key's slot at the next claim.
SELECT ok((jobs.complete(pg_temp.id_of('a1'), 'w', 1)).accepted, 'a job of key a completes');
SELECT is((SELECT array_agg(l.job_id) FROM jobs.claim_many(pg_temp.ids('{a2,a3,b3}'), 'w') AS l),
          pg_temp.ids('{a2}'), 'then exactly one more of key a is granted, and none of the full key b');
SELECT is((SELECT count(*) FROM jobs.kind_slot WHERE kind = 'ck.t' AND concurrency_key = 'a'), 2::bigint,
          'the ended lease''s slot was dropped, the new one recorded');
-- claim_next passes over a key at its bound.
SELECT is((SELECT array_agg(l.job_id) FROM jobs.claim_next('w', ARRAY['ck.q'], 10) AS l), ARRAY[:t0]::bigint[],
          'claim_next passes over keys at their bound: only the key with room has a job claimed');
SELECT ok((jobs.complete(pg_temp.id_of('b1'), 'w', 1)).accepted, 'a job of key b completes');
SELECT is((SELECT array_agg(l.job_id) FROM jobs.claim_next('w', ARRAY['ck.q'], 10) AS l),
          pg_temp.ids('{b3}'), 'then claim_next takes the one more key b has room for');

-- Fair claiming: a noisy key with 300 queued jobs submitted first, a quiet one with 3, and
-- 2 jobs without a key, in a queue whose kind has no bound.
SELECT jobs.define_type('ck.f', queue => 'ck.fair') IS NOT NULL AS defined;
SELECT count(*) FROM jobs.submit_many((SELECT jsonb_agg(jsonb_build_object('kind', 'ck.f', 'concurrency_key', 'noisy',
                                                                           'payload', jsonb_build_object('n', n)))
                                         FROM generate_series(1, 300) AS n));
SELECT count(*) FROM jobs.submit_many('[{"kind": "ck.f", "concurrency_key": "quiet"}, {"kind": "ck.f", "concurrency_key": "quiet"},
                                        {"kind": "ck.f", "concurrency_key": "quiet"}, {"kind": "ck.f"}, {"kind": "ck.f"}]');
CREATE TEMP TABLE first_batch AS
SELECT l.job_id, j.concurrency_key FROM jobs.claim_next('w', ARRAY['ck.fair'], 10) AS l JOIN jobs.job AS j ON j.id = l.job_id;
SELECT is((SELECT count(*) FROM first_batch WHERE concurrency_key = 'quiet'), 3::bigint,
          'claim_next: the quiet key''s 3 jobs are in the first batch of 10, though 300 of the noisy key are older');
SELECT is((SELECT count(*) FROM first_batch WHERE concurrency_key IS NULL), 2::bigint,
          '... and so are the jobs without a key (one more turn)');
SELECT is((SELECT count(*) FROM first_batch WHERE concurrency_key = 'noisy'), 4::bigint,
          '... the noisy key taking its share, ceil(10 / 3 turns)');
SELECT is((SELECT array_agg(l.job_id ORDER BY l.job_id) FROM jobs.claim_next('w', ARRAY['ck.fair'], 10) AS l),
          (SELECT array_agg(j.id ORDER BY j.id) FROM (SELECT id FROM jobs.job WHERE concurrency_key = 'noisy' AND status = 'queued'
                                                       ORDER BY id LIMIT 10) AS j),
          'with the quiet key drained, the noisy key has every turn, oldest first');
-- Turns come before priority: a key's first job goes before any key's second, however
-- urgent. Three keys in a batch of 4 each offer a share of 2; the fourth place goes to the
-- most urgent second job, never to the urgent keys' second jobs ahead of the idle key's first.
SELECT jobs.define_type('ck.m', queue => 'ck.mix') IS NOT NULL AS defined;
SELECT count(*) FROM jobs.submit_many('[{"kind": "ck.m", "concurrency_key": "a", "priority": 0}, {"kind": "ck.m", "concurrency_key": "a", "priority": 0},
                                        {"kind": "ck.m", "concurrency_key": "b", "priority": 0}, {"kind": "ck.m", "concurrency_key": "b", "priority": 0},
                                        {"kind": "ck.m", "concurrency_key": "c", "priority": 5}, {"kind": "ck.m", "concurrency_key": "c", "priority": 5}]');
SELECT is((SELECT array_agg(j.concurrency_key ORDER BY j.id) FROM jobs.claim_next('w', ARRAY['ck.mix'], 4) AS l JOIN jobs.job AS j ON j.id = l.job_id),
          ARRAY['a', 'a', 'b', 'c'], 'claim_next: every key''s first job before any second one, the less urgent key''s included');
SELECT count(jobs.cancel(id)) FROM jobs.job WHERE queue = 'ck.mix' AND status = 'queued';   -- out of keyed_queues' way below
-- Without keys the order is the plain one (nothing changed for unkeyed queues).
SELECT jobs.define_type('ck.plain', queue => 'ck.plain') IS NOT NULL AS defined;
SELECT count(*) FROM jobs.submit_many('[{"kind": "ck.plain", "priority": 5}, {"kind": "ck.plain", "priority": 1}, {"kind": "ck.plain", "priority": 5}]');
SELECT is((SELECT array_agg(j.priority ORDER BY l.job_id) FROM jobs.claim_next('w', ARRAY['ck.plain'], 2) AS l JOIN jobs.job AS j ON j.id = l.job_id),
          ARRAY[5, 1]::smallint[], 'a queue without keyed jobs keeps the priority order (the urgent one and the oldest other)');

-- keyed_queues: where a worker fed ids by Redis claims fairly (jobs.claim_next) instead of by id.
SELECT is((SELECT array_agg(k.queue) FROM jobs.keyed_queues(ARRAY['ck.plain', 'ck.fair', NULL, 'ck.q', 'ck.fair']) AS k),
          ARRAY['ck.fair', 'ck.q'], 'keyed_queues: the queues holding queued keyed jobs, once each, by name; a NULL element is ignored');
SELECT is_empty($$ SELECT * FROM jobs.keyed_queues(ARRAY['ck.plain', 'no.such.queue']) $$,
                'keyed_queues: a queue of unkeyed jobs only, or an unknown one, is not listed');
SELECT is_empty($$ SELECT * FROM jobs.keyed_queues('{}') $$, 'keyed_queues: no queues -> no rows');
SELECT is((SELECT array_agg(k.queue) FROM jobs.keyed_queues() AS k WHERE k.queue LIKE 'ck.%'),
          ARRAY['ck.fair', 'ck.q'], 'keyed_queues: NULL means every queue');
SET LOCAL ROLE jobs_worker;
SELECT is((SELECT count(*) FROM jobs.keyed_queues(ARRAY['ck.q'])), 1::bigint, 'keyed_queues: granted to jobs_worker');
RESET ROLE;

SELECT is((SELECT count(*) FROM jobs.audit() WHERE violations > 0), 0::bigint, 'every history passes jobs.audit');
SELECT * FROM finish();
ROLLBACK;
