-- jobs.submit: (new) -> queued, event 'submitted', JB005, JB004 at octet_length(payload::text),
-- 22023 for bad input, idempotency keys per kind, run_after, notify (docs/design.md §2-§5).
BEGIN;
SELECT plan(64);

SELECT jobs.define_type('sub_t', queue => 'sub_q', max_retries => 4, lease_timeout => '7 seconds', timeout => '70 seconds');
SELECT jobs.define_type('sub_u');
SELECT jobs.define_type('sub_small', max_payload_bytes => 20);

CREATE TEMP VIEW counts AS
SELECT (SELECT count(*) FROM jobs.job) AS jobs_n, (SELECT count(*) FROM jobs.history) AS events_n;

-- a new job.
CREATE TEMP TABLE j1 AS SELECT * FROM jobs.submit('sub_t', '{"invoice": 42}');
SELECT is((SELECT status FROM j1), 'queued'::jobs.status, 'submit: a new job is queued');
SELECT is((SELECT (kind, queue, payload, lease_version, retry_count, max_retries, lease_timeout, timeout)::text FROM j1),
          ('sub_t', 'sub_q', '{"invoice": 42}'::jsonb, 0::bigint, 0, 4, interval '7 seconds', interval '70 seconds')::text,
          'submit: kind, queue, payload, lease_version 0, retry_count 0 and the kind''s max_retries and timeouts are copied');
SELECT is((SELECT (run_after, created_at, updated_at)::text FROM j1), (now(), now(), now())::text,
          'submit: run_after, created_at and updated_at are now()');
SELECT is((SELECT (owned_by, claimed_at, finished_at, lease_expires_at, result, error, parent_id, cancel_requested_at,
                   idempotency_key, ordering_key)::text FROM j1),
          (NULL::text, NULL::timestamptz, NULL::timestamptz, NULL::timestamptz, NULL::jsonb, NULL::text, NULL::bigint,
           NULL::timestamptz, NULL::text, NULL::text)::text,
          'submit: no owner, lease, result, error, parent, keys or finish time');
SELECT is((SELECT pending_children FROM j1), 0, 'submit: pending_children 0');
SELECT is((SELECT j::text FROM jobs.job AS j WHERE j.id = (SELECT id FROM j1)), (SELECT j1::text FROM j1),
          'submit: returns the stored row');
SELECT results_eq($$ SELECT from_status, to_status, lease_version, worker, reason, error, at
                       FROM jobs.history WHERE job_id = (SELECT id FROM j1) $$,
                  $$ VALUES (NULL::jobs.status, 'queued'::jobs.status, 0::bigint, NULL::text, 'submitted', NULL::text, now()) $$,
                  'submit: one event (new) -> queued, reason submitted, lease_version 0, stamped now()');
SELECT is((jobs.submit('sub_t')).payload, '{}'::jsonb, 'submit: omitted payload -> {}');
SELECT is((jobs.submit('sub_t', NULL)).payload, '{}'::jsonb, 'submit: NULL payload -> {}');
SELECT is((SELECT count(*) FROM jobs.claim((SELECT id FROM j1), 'w')), 1::bigint, 'submit: the new job is claimable at once');

-- unknown kind -> JB005, nothing inserted.
CREATE TEMP TABLE c0 AS SELECT * FROM counts;
SELECT throws_ok($$ SELECT jobs.submit('sub_nope', '{}') $$, 'JB005', NULL, 'submit: unknown kind -> JB005');
SELECT throws_like($$ SELECT jobs.submit('sub_nope', '{}') $$, '%jobs.submit%sub_nope%',
                   'submit: the JB005 message names the function and the kind');
SELECT is((SELECT (jobs_n, events_n)::text FROM counts), (SELECT (jobs_n, events_n)::text FROM c0),
          'submit: unknown kind -> nothing inserted (jobs and events unchanged)');

-- payload size = octet_length(payload::text), limit inclusive.
SELECT is(octet_length(jsonb_build_object('a', repeat('x', 11))::text), 20, 'submit: (fixture) an 11-character value makes a 20-byte payload');
SELECT is((jobs.submit('sub_small', jsonb_build_object('a', repeat('x', 11)))).status, 'queued'::jobs.status,
          'submit: payload of exactly max_payload_bytes (20) is accepted');
CREATE TEMP TABLE c1 AS SELECT * FROM counts;
SELECT throws_ok($$ SELECT jobs.submit('sub_small', jsonb_build_object('a', repeat('x', 12))) $$, 'JB004', NULL,
                 'submit: payload one byte over max_payload_bytes (21 > 20) -> JB004');
SELECT throws_ok($$ SELECT jobs.submit('sub_small', jsonb_build_object('a', repeat('é', 6))) $$, 'JB004', NULL,
                 'submit: size is counted in bytes, not characters (15 characters, 21 bytes) -> JB004');
SELECT is((SELECT (jobs_n, events_n)::text FROM counts), (SELECT (jobs_n, events_n)::text FROM c1),
          'submit: rejected payloads inserted nothing');
SELECT is((jobs.submit('sub_u', jsonb_build_object('a', repeat('x', 262144 - 9)))).status, 'queued'::jobs.status,
          'submit: default limit: a payload of exactly 262144 bytes is accepted');
CREATE TEMP TABLE c2 AS SELECT * FROM counts;
SELECT throws_ok($$ SELECT jobs.submit('sub_u', jsonb_build_object('a', repeat('x', 262144 - 8))) $$, 'JB004', NULL,
                 'submit: default limit: a payload of 262145 bytes -> JB004');
SELECT is((SELECT (jobs_n, events_n)::text FROM counts), (SELECT (jobs_n, events_n)::text FROM c2),
          'submit: the oversized default-limit payload inserted nothing');

-- bad input -> 22023, nothing inserted.
CREATE TEMP TABLE c3 AS SELECT * FROM counts;
SELECT throws_ok($$ SELECT jobs.submit('sub_t', '[1, 2]') $$, '22023', NULL, 'submit: array payload -> 22023');
SELECT throws_ok($$ SELECT jobs.submit('sub_t', '"text"') $$, '22023', NULL, 'submit: string payload -> 22023');
SELECT throws_ok($$ SELECT jobs.submit('sub_t', '7') $$, '22023', NULL, 'submit: number payload -> 22023');
SELECT throws_ok($$ SELECT jobs.submit('sub_t', 'true') $$, '22023', NULL, 'submit: boolean payload -> 22023');
SELECT throws_ok($$ SELECT jobs.submit(NULL) $$, '22023', NULL, 'submit: NULL kind -> 22023');
SELECT throws_ok($$ SELECT jobs.submit('') $$, '22023', NULL, 'submit: empty kind (malformed) -> 22023');
SELECT throws_ok($$ SELECT jobs.submit('bad kind{x}') $$, '22023', NULL, 'submit: kind with a space and braces (malformed) -> 22023');
SELECT throws_ok($$ SELECT jobs.submit('sub_t', '{}', idempotency_key => '') $$, '22023', NULL, 'submit: empty idempotency_key -> 22023');
SELECT throws_ok($$ SELECT jobs.submit('sub_t', '{}', ordering_key => '') $$, '22023', NULL, 'submit: empty ordering_key -> 22023');
SELECT throws_like($$ SELECT jobs.submit('sub_t', '[1]') $$, '%jobs.submit%payload%',
                   'submit: the 22023 message names the function and the payload');
SELECT is((SELECT (jobs_n, events_n)::text FROM counts), (SELECT (jobs_n, events_n)::text FROM c3),
          'submit: rejected input inserted nothing');
SELECT is((jobs.submit('sub_t', '{}', notify => NULL)).status, 'queued'::jobs.status, 'submit: notify NULL is treated as true');
SELECT is((SELECT count(*) FROM jobs.job WHERE kind = 'sub_t'), 4::bigint, 'submit: four sub_t jobs so far');

-- idempotency keys.
CREATE TEMP TABLE k1 AS SELECT * FROM jobs.submit('sub_t', '{"v": 1}', 'order-7');
CREATE TEMP TABLE c4 AS SELECT * FROM counts;
CREATE TEMP TABLE k2 AS SELECT * FROM jobs.submit('sub_t', '{"v": 2}', 'order-7', run_after => now() + interval '1 hour',
                                                  ordering_key => 'other');
SELECT is((SELECT id FROM k2), (SELECT id FROM k1), 'submit: a repeated idempotency key returns the existing job');
SELECT is((SELECT k2::text FROM k2), (SELECT k1::text FROM k1),
          'submit: ... unchanged (payload, run_after and ordering_key of the repeat are ignored)');
SELECT is((SELECT (jobs_n, events_n)::text FROM counts), (SELECT (jobs_n, events_n)::text FROM c4),
          'submit: a repeated idempotency key inserts no job and logs no event');
SELECT is((SELECT payload FROM jobs.job WHERE id = (SELECT id FROM k1)), '{"v": 1}'::jsonb,
          'submit: the stored payload is the first one');
CREATE TEMP TABLE k3 AS SELECT * FROM jobs.submit('sub_u', '{"v": 3}', 'order-7');
SELECT isnt((SELECT id FROM k3), (SELECT id FROM k1), 'submit: the same key under another kind creates a new job (unique per kind)');
SELECT is((SELECT count(*) FROM jobs.job WHERE idempotency_key = 'order-7'), 2::bigint, 'submit: one job per (kind, key)');
-- The key holds while the row exists, whatever its state.
SELECT jobs.complete((SELECT id FROM k1), 'w', (SELECT lease_version FROM jobs.claim((SELECT id FROM k1), 'w')), '{"r": 1}');
CREATE TEMP TABLE k4 AS SELECT * FROM jobs.submit('sub_t', '{"v": 4}', 'order-7');
SELECT is((SELECT (id, status, payload)::text FROM k4), (SELECT (id, 'done'::jobs.status, '{"v": 1}'::jsonb)::text FROM k1),
          'submit: a repeated key of a done job returns it (done, original payload), no new job');
SELECT is((SELECT count(*) FROM jobs.history WHERE job_id = (SELECT id FROM k1) AND reason = 'submitted'), 1::bigint,
          'submit: the done job was logged submitted once');
SELECT is((jobs.submit('sub_t', '{}', 'order-7', notify => false)).id, (SELECT id FROM k1),
          'submit: the repeat with notify => false returns the same job too');
SELECT is((SELECT idempotency_key FROM k1), 'order-7', 'submit: the key is stored on the job');
SELECT is((SELECT count(*) FROM jobs.job WHERE kind = 'sub_t'), 5::bigint, 'submit: one more sub_t job after all repeats');

-- run_after.
CREATE TEMP TABLE later AS SELECT * FROM jobs.submit('sub_t', '{}', run_after => now() + interval '10 minutes');
SELECT is((SELECT run_after FROM later), now() + interval '10 minutes', 'submit: a future run_after is stored');
SELECT is_empty($$ SELECT * FROM jobs.claim((SELECT id FROM later), 'w') $$, 'submit: a job with a future run_after is not claimable yet');
SELECT is((SELECT status FROM jobs.job WHERE id = (SELECT id FROM later)), 'queued'::jobs.status,
          'submit: ... and stays queued');
UPDATE jobs.job SET run_after = now() - interval '1 second' WHERE id = (SELECT id FROM later);
SELECT is((SELECT count(*) FROM jobs.claim((SELECT id FROM later), 'w')), 1::bigint, 'submit: once run_after has passed it is claimable');
SELECT is((jobs.submit('sub_t', '{}', run_after => now() - interval '1 hour')).run_after, now(),
          'submit: a run_after in the past is stored as now()');
SELECT is((jobs.submit('sub_t', '{}', run_after => NULL)).run_after, now(), 'submit: NULL run_after means now()');
SELECT is((jobs.submit('sub_t', '{}', ordering_key => 'acct:1')).ordering_key, 'acct:1', 'submit: the ordering_key is stored');

-- notify (delivery happens on commit; checked by pytest).
SELECT lives_ok($$ SELECT jobs.submit('sub_t', '{"n": "notify"}', notify => true) $$, 'submit: notify => true raises no error');
SELECT lives_ok($$ SELECT jobs.submit('sub_t', '{"n": "quiet"}', notify => false) $$, 'submit: notify => false raises no error');
SELECT is((SELECT count(*) FROM jobs.job WHERE kind = 'sub_t' AND payload ? 'n'), 2::bigint,
          'submit: both notify variants created their job');
SELECT is((SELECT count(*) FROM jobs.history e JOIN jobs.job j ON j.id = e.job_id WHERE j.kind = 'sub_t' AND j.payload ? 'n'),
          2::bigint, 'submit: both notify variants logged their submitted event');

SELECT throws_ok($$ SELECT jobs.submit('sub_t', run_after => 'infinity') $$, '22023', NULL,
                 'submit: run_after infinity -> 22023 (it could never run)');
SELECT is(jobs.submit('sub_t', run_after => '-infinity')::text IS NOT NULL AND
          (SELECT run_after FROM jobs.job WHERE kind = 'sub_t' ORDER BY id DESC LIMIT 1) = now(), true,
          'submit: run_after in the past (even -infinity) is stored as now()');

SELECT jobs.define_type('sub_bounds');
SELECT throws_ok($$ SELECT jobs.submit('sub_bounds', '{}', idempotency_key => repeat('k', 1001)) $$, '22023', NULL,
                 'submit: idempotency_key over 1000 bytes -> 22023 (not an index-size error)');
SELECT throws_ok($$ SELECT jobs.submit('sub_bounds', '{}', ordering_key => repeat('k', 1001)) $$, '22023', NULL,
                 'submit: ordering_key over 1000 bytes -> 22023');
SELECT lives_ok($$ SELECT jobs.submit('sub_bounds', '{}', idempotency_key => repeat('k', 1000)) $$,
                'submit: idempotency_key of exactly 1000 bytes is accepted');
SELECT throws_ok($$ SELECT jobs.submit('sub_bounds', 'null') $$, '22023', NULL,
                 'submit: JSON null payload -> 22023 (SQL NULL means the default {})');
SELECT is((SELECT payload FROM jobs.submit('sub_bounds', NULL)), '{}'::jsonb,
          'submit: SQL NULL payload -> {}');
SELECT is((SELECT count(*) FROM jobs.job WHERE kind = 'sub_bounds'), 2::bigint,
          'submit: the rejected calls inserted nothing');

SELECT * FROM finish();
ROLLBACK;
