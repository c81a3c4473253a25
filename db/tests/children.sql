-- jobs.children: a fan-in coordinator's children by id with their status, result and error;
-- zero rows for a job without children or an unknown id (docs/design.md §4, decisions).
BEGIN;
SELECT plan(10);

SELECT jobs.define_type('ch_t');
SELECT jobs.define_type('ch_then');
CREATE TEMP TABLE coord AS
SELECT * FROM jobs.fan_out('[{"kind": "ch_t", "payload": {"i": 0}}, {"kind": "ch_t", "payload": {"i": 1}},
                             {"kind": "ch_t", "payload": {"i": 2}}]', '{"kind": "ch_then"}');
CREATE TEMP TABLE other AS
SELECT * FROM jobs.fan_out('[{"kind": "ch_t", "payload": {"i": 9}}]', '{"kind": "ch_then"}');
CREATE FUNCTION pg_temp.cid() RETURNS bigint LANGUAGE sql AS $$ SELECT id FROM coord $$;
CREATE FUNCTION pg_temp.kid(i int) RETURNS bigint LANGUAGE sql AS $$
    SELECT id FROM jobs.job WHERE parent_id = pg_temp.cid() AND (payload ->> 'i')::int = i
$$;

SELECT is(ARRAY(SELECT (payload ->> 'i')::int FROM jobs.children(pg_temp.cid())), ARRAY[0, 1, 2],
          'children: lists the coordinator''s three children, by id');
SELECT is(ARRAY(SELECT c::text FROM jobs.children(pg_temp.cid()) AS c),
          ARRAY(SELECT r::text FROM jobs.job AS r WHERE r.parent_id = pg_temp.cid() ORDER BY r.id),
          'children: each row is the stored child row');
SELECT is(ARRAY(SELECT DISTINCT parent_id FROM jobs.children(pg_temp.cid())), ARRAY[pg_temp.cid()],
          'children: only that coordinator''s children (not the other fan-out''s)');

-- Results and errors as they end.
SELECT jobs.complete(pg_temp.kid(0), 'w', (SELECT lease_version FROM jobs.claim(pg_temp.kid(0), 'w')), '{"sum": 10}');
SELECT jobs.fail(pg_temp.kid(1), 'w', (SELECT lease_version FROM jobs.claim(pg_temp.kid(1), 'w')), 'bad input', false);
SELECT results_eq($$ SELECT status::text, result, error FROM jobs.children(pg_temp.cid()) $$,
                  $$ VALUES ('done', '{"sum": 10}'::jsonb, NULL::text), ('failed', NULL, 'bad input'), ('queued', NULL, NULL) $$,
                  'children: shows each child''s status, result and error');

-- Jobs without children, unknown ids.
SELECT is_empty($$ SELECT * FROM jobs.children(pg_temp.kid(0)) $$, 'children: a child has no children -> zero rows');
SELECT is_empty($$ SELECT * FROM jobs.children((jobs.submit('ch_t')).id) $$, 'children: a plain job -> zero rows');
SELECT is_empty($$ SELECT * FROM jobs.children((jobs.fan_out('[]', '{"kind": "ch_then"}')).id) $$,
                'children: a coordinator of an empty fan-out -> zero rows');
SELECT is_empty($$ SELECT * FROM jobs.children(-1) $$, 'children: unknown id -> zero rows, no error');

-- A replayed child is still listed once; read-only.
SELECT jobs.replay(pg_temp.kid(1));
CREATE TEMP TABLE snap AS SELECT md5(string_agg(r::text, ',' ORDER BY r.id)) AS h, (SELECT count(*) FROM jobs.history) AS e FROM jobs.job AS r;
SELECT is(ARRAY(SELECT status::text FROM jobs.children(pg_temp.cid())), ARRAY['done', 'queued', 'queued'],
          'children: a replayed child is listed once, queued again');
SELECT is((SELECT (md5(string_agg(r::text, ',' ORDER BY r.id)), (SELECT count(*) FROM jobs.history))::text FROM jobs.job AS r),
          (SELECT (h, e)::text FROM snap), 'children: reading changes nothing');

SELECT * FROM finish();
ROLLBACK;
