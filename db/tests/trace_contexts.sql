-- The producer's trace context (docs/observability.md, "Tracing"): a W3C traceparent given at
-- submit is stored with the job and handed to tracing workers by jobs.trace_contexts, for a
-- whole claimed batch in one call; a malformed one is 22023 and writes nothing.
BEGIN;
SELECT plan(12);
SELECT jobs.define_type('tc.k');
CREATE TEMP TABLE ids AS
SELECT 'one' AS name, (jobs.submit('tc.k', traceparent => '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01')).id
UNION ALL
SELECT 'many', (r).id FROM (SELECT jobs.submit_many('[{"kind": "tc.k", "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"},
                                                      {"kind": "tc.k"}]') AS r) AS m;
SELECT is((SELECT traceparent FROM jobs.job WHERE id = (SELECT min(id) FROM ids)), '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01',
          'submit stores the traceparent');
SELECT is(ARRAY(SELECT traceparent FROM jobs.job WHERE id IN (SELECT id FROM ids WHERE name = 'many') ORDER BY id),
          ARRAY['00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00', NULL],
          'a submit_many spec stores its own; a spec without one stores NULL');
SELECT is((SELECT array_agg(job_id ORDER BY job_id) FROM jobs.trace_contexts(ARRAY(SELECT id FROM ids))),
          ARRAY(SELECT id FROM jobs.job WHERE traceparent IS NOT NULL ORDER BY id),
          'trace_contexts answers the jobs that have a context, in id order');
SELECT is((SELECT count(*) FROM jobs.trace_contexts('{}')), 0::bigint, 'trace_contexts of no ids: no rows');
SELECT throws_ok($$ SELECT * FROM jobs.trace_contexts(NULL) $$, '22023', NULL, 'trace_contexts(NULL): 22023');
SELECT throws_ok($$ SELECT * FROM jobs.trace_contexts(ARRAY(SELECT generate_series(1, 10001)::bigint)) $$, '22023', NULL,
                 'trace_contexts of over 10000 ids: 22023');
SELECT throws_ok($$ SELECT jobs.submit('tc.k', traceparent => 'not-a-context') $$, '22023',
                 'jobs.submit: traceparent must be a W3C traceparent, got "not-a-context"', 'a malformed traceparent: 22023');
SELECT throws_ok($$ SELECT jobs.submit('tc.k', traceparent => '00-00000000000000000000000000000000-00f067aa0ba902b7-01') $$, '22023', NULL,
                 'an all-zero trace id (invalid in W3C Trace Context): 22023');
SELECT throws_ok($$ SELECT jobs.submit('tc.k', traceparent => '00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01') $$, '22023', NULL,
                 'an all-zero parent id: 22023');
SELECT throws_ok($$ SELECT jobs.submit('tc.k', traceparent => '00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01') $$, '22023', NULL,
                 'upper-case hex (W3C asks for lower case): 22023');
SELECT throws_ok($$ SELECT jobs.submit_many('[{"kind": "tc.k", "traceparent": 7}]') $$, '22023', NULL, 'a traceparent that is no string: 22023');
SELECT is((SELECT count(*) FROM jobs.job), 3::bigint, 'the refused submits wrote nothing');
SELECT * FROM finish();
ROLLBACK;
