-- Producer-side caps, each a documented SQLSTATE with a HINT that changes nothing
-- (docs/errors.md, docs/sql-api.md): cancel reason <= 4096 bytes; <= 10000 specs per
-- submit_many / fan_out; mark_enqueue_failed <= 10000 ids, and only jobs queued and written in
-- the last minute; payload nesting <= 64 levels; payload numbers within the IEEE-754 double
-- range; run_after before 9999-12-30 UTC with an offset PostgreSQL accepts; worker ids
-- printable and without surrounding whitespace.
BEGIN;
SELECT plan(71);
\ir helpers/lease_helpers.psql

SELECT jobs.define_type('lim_t', queue => 'lim_q');
-- counts of jobs and events: equal before and after = nothing written
CREATE FUNCTION pg_temp.totals() RETURNS text LANGUAGE sql STABLE
    AS $$ SELECT (SELECT count(*) FROM jobs.job)::text || '/' || (SELECT count(*) FROM jobs.history)::text $$;
-- a payload nested n levels deep: an object holding n - 1 nested arrays
CREATE FUNCTION pg_temp.deep(n integer) RETURNS text LANGUAGE sql IMMUTABLE
    AS $$ SELECT '{"a": ' || repeat('[', n - 1) || repeat(']', n - 1) || '}' $$;
-- n levels of objects
CREATE FUNCTION pg_temp.deep_objects(n integer) RETURNS text LANGUAGE sql IMMUTABLE
    AS $$ SELECT repeat('{"a": ', n - 1) || '{}' || repeat('}', n - 1) $$;
CREATE FUNCTION pg_temp.specs(n integer) RETURNS jsonb LANGUAGE sql IMMUTABLE
    AS $$ SELECT jsonb_agg(jsonb_build_object('kind', 'lim_t', 'payload', jsonb_build_object('i', i), 'notify', false))
            FROM generate_series(1, n) AS i $$;
CREATE TEMP TABLE before_totals AS SELECT pg_temp.totals() AS t;

-- cancel: reason size.
DO $$ BEGIN PERFORM pg_temp.job('c1', 'lim_t'); PERFORM pg_temp.snap(pg_temp.id('c1')); END $$;
SELECT is(pg_temp.error_of(format('SELECT jobs.cancel(%s, repeat(''x'', 4097))', pg_temp.id('c1'))),
          '22023 jobs.cancel hint=true', 'cancel: a reason of 4097 bytes -> 22023');
SELECT is(pg_temp.error_of(format('SELECT jobs.cancel(%s, repeat(''é'', 2049))', pg_temp.id('c1'))),
          '22023 jobs.cancel hint=true', 'cancel: the limit counts bytes (2049 two-byte characters) -> 22023');
SELECT is(pg_temp.error_of(format('SELECT jobs.cancel(%s, repeat(''x'', 10 * 1024 * 1024))', pg_temp.id('c1'))),
          '22023 jobs.cancel hint=true', 'cancel: a reason of 10 MB -> 22023');
SELECT is(pg_temp.state(pg_temp.id('c1')), pg_temp.snapped(pg_temp.id('c1')), 'cancel: refused reasons changed nothing');
SELECT is((jobs.cancel(pg_temp.id('c1'), repeat('x', 4096))).accepted, true, 'cancel: a reason of exactly 4096 bytes is accepted');
SELECT is((SELECT error FROM jobs.job WHERE id = pg_temp.id('c1')), repeat('x', 4096), 'cancel: ... and recorded as the error');

-- submit_many and fan_out: specs per call.
CREATE TEMP TABLE t0 AS SELECT pg_temp.totals() AS t;
SELECT is(pg_temp.error_of($$ SELECT * FROM jobs.submit_many(pg_temp.specs(10001)) $$),
          '22023 jobs.submit_many hint=true', 'submit_many: 10001 specs -> 22023');
SELECT throws_ok($$ SELECT * FROM jobs.submit_many(pg_temp.specs(10001)) $$, '22023',
                 'jobs.submit_many: 10001 job specs in one call; the limit is 10000',
                 'submit_many: ... the message gives the count and the limit');
SELECT is(pg_temp.error_of($$ SELECT jobs.fan_out(pg_temp.specs(10001), '{"kind": "lim_t"}') $$),
          '22023 jobs.fan_out hint=true', 'fan_out: 10001 children -> 22023');
SELECT is(pg_temp.totals(), (SELECT t FROM t0), 'submit_many, fan_out: refused batches wrote no job and no event');
SELECT is((SELECT count(*) FROM jobs.submit_many(pg_temp.specs(10000))), 10000::bigint,
          'submit_many: exactly 10000 specs are accepted');
SELECT is((SELECT pending_children FROM jobs.fan_out(pg_temp.specs(10000), '{"kind": "lim_t"}')), 10000,
          'fan_out: exactly 10000 children are accepted');

-- mark_enqueue_failed: ids per call, and only recent queued jobs.
DO $$ BEGIN
    PERFORM pg_temp.job('fresh', 'lim_t');
    PERFORM pg_temp.job('old', 'lim_t');
    PERFORM pg_temp.elapse(pg_temp.id('old'), interval '61 seconds');
    PERFORM pg_temp.snap(pg_temp.id('fresh'));
    PERFORM pg_temp.snap(pg_temp.id('old'));
END $$;
SELECT is(pg_temp.error_of(format('SELECT jobs.mark_enqueue_failed(array_append(array_fill(0::bigint, ARRAY[10000]), %s))',
                                  pg_temp.id('fresh'))),
          '22023 jobs.mark_enqueue_failed hint=true', 'mark_enqueue_failed: 10001 ids -> 22023');
SELECT is(pg_temp.state(pg_temp.id('fresh')), pg_temp.snapped(pg_temp.id('fresh')),
          'mark_enqueue_failed: the refused call marked nothing, not even the valid id in it');
SELECT is(jobs.mark_enqueue_failed(ARRAY[pg_temp.id('old'), pg_temp.id('fresh')]), 1,
          'mark_enqueue_failed: of a job written 61 s ago and one just submitted, only the recent one is marked');
SELECT is(pg_temp.state(pg_temp.id('old')), pg_temp.snapped(pg_temp.id('old')),
          'mark_enqueue_failed: the older queued job is left alone (stale_queued finds it)');
SELECT is((SELECT status FROM jobs.job WHERE id = pg_temp.id('fresh')), 'enqueue_failed'::jobs.status,
          'mark_enqueue_failed: the recent queued job is parked');
SELECT is(jobs.mark_enqueue_failed(array_append(array_fill(0::bigint, ARRAY[9999]), pg_temp.id('fresh'))), 0,
          'mark_enqueue_failed: 10000 ids are accepted (and an already parked job is not queued: skipped)');
SELECT is(jobs.mark_enqueue_failed(ARRAY(SELECT s.id FROM jobs.submit_many(pg_temp.specs(10000)) AS s)), 10000,
          'mark_enqueue_failed: the 10000 ids of one full submit_many just made -> 10000 marked');

-- payload nesting depth: 64 levels accepted, 65 refused (JB004), checked without recursion.
SELECT is((jobs.submit('lim_t', pg_temp.deep(64)::jsonb)).payload, pg_temp.deep(64)::jsonb,
          'payload depth: 64 levels (an object and 63 arrays) are accepted');
SELECT is((jobs.submit('lim_t', pg_temp.deep_objects(64)::jsonb)).payload, pg_temp.deep_objects(64)::jsonb,
          'payload depth: 64 levels of objects are accepted');
SELECT is((SELECT count(*) FROM jobs.submit_many(jsonb_build_array(jsonb_build_object('kind', 'lim_t', 'payload', pg_temp.deep(64)::jsonb)))),
          1::bigint, 'payload depth: submit_many accepts 64 levels');
SELECT is((SELECT count(*) FROM jobs.job WHERE payload = pg_temp.deep(64)::jsonb), 2::bigint,
          'payload depth: the accepted payloads were written as given');
CREATE TEMP TABLE t2 AS SELECT pg_temp.totals() AS t;
SELECT is(pg_temp.error_of($$ SELECT jobs.submit('lim_t', pg_temp.deep(65)::jsonb) $$), 'JB004 jobs.submit hint=true',
          'payload depth: 65 levels -> JB004');
SELECT throws_ok($$ SELECT jobs.submit('lim_t', pg_temp.deep_objects(65)::jsonb) $$, 'JB004',
                 'jobs.submit: payload is nested deeper than 64 levels', 'payload depth: 65 levels of objects -> JB004, saying why');
SELECT throws_ok($$ SELECT * FROM jobs.submit_many(jsonb_build_array('{"kind": "lim_t"}'::jsonb,
                                                   jsonb_build_object('kind', 'lim_t', 'payload', pg_temp.deep(65)::jsonb))) $$,
                 'JB004', 'jobs.submit_many: specs[1]: payload is nested deeper than 64 levels',
                 'payload depth: submit_many names the spec');
SELECT throws_ok($$ SELECT jobs.fan_out(jsonb_build_array(jsonb_build_object('kind', 'lim_t', 'payload', pg_temp.deep(65)::jsonb)),
                                        '{"kind": "lim_t"}') $$,
                 'JB004', 'jobs.fan_out: children[0]: payload is nested deeper than 64 levels',
                 'payload depth: fan_out names the child');
SELECT throws_ok($$ SELECT jobs.fan_out('[]', jsonb_build_object('kind', 'lim_t', 'payload', pg_temp.deep(65)::jsonb)) $$,
                 'JB004', NULL, 'payload depth: fan_out checks the coordinator''s payload too');
-- Far deeper than a recursive check could walk on PostgreSQL's 2 MB stack, still below the
-- depth at which PostgreSQL's own JSON parser gives up (54001) while reading the argument.
SELECT is(pg_temp.error_of($$ SELECT jobs.submit('lim_t', pg_temp.deep(10000)::jsonb) $$), 'JB004 jobs.submit hint=true',
          'payload depth: 10000 levels -> JB004 (not 54001: the check descends at most 64 levels)');
SELECT is(pg_temp.error_of($$ SELECT * FROM jobs.submit_many(jsonb_build_array(jsonb_build_object('kind', 'lim_t', 'payload', pg_temp.deep(10000)::jsonb))) $$),
          'JB004 jobs.submit_many hint=true', 'payload depth: submit_many of 10000 levels -> JB004');
-- 100,000 levels never reach a jobs function: PostgreSQL's JSON parser refuses the value
-- (54001) while converting the argument, before the call (docs/errors.md).
SELECT is(pg_temp.error_of($$ SELECT jobs.submit('lim_t', pg_temp.deep(100000)::jsonb) $$), '54001 stack depth limit exceeded hint=true',
          'payload depth: 100000 levels -> 54001 from PostgreSQL''s JSON parser, before jobs.submit runs');
SELECT is(pg_temp.totals(), (SELECT t FROM t2), 'payload depth: every refused payload wrote no job and no event');
-- Many brackets, shallow: the pre-check only selects payloads for the bounded walk.
SELECT is((jobs.submit('lim_t', ('{"a": [' || repeat('[], ', 199) || '[]], "s": "' || repeat('[{', 100) || '"}')::jsonb)).status,
          'queued'::jobs.status, 'payload depth: 200 sibling arrays and brackets inside strings (depth 3) are accepted');

-- payload numbers: no larger in magnitude than 1.7976931348623157e308 (the largest double),
-- or no JSON reader can decode the job (Python refuses the 5001 digits of 1e5000): 22003.
CREATE TEMP TABLE t5 AS SELECT pg_temp.totals() AS t;
SELECT is(pg_temp.error_of($$ SELECT jobs.submit('lim_t', '{"x": 1e5000}') $$), '22003 jobs.submit hint=true',
          'payload number: 1e5000 -> 22003');
SELECT throws_ok($$ SELECT jobs.submit('lim_t', '{"x": 1.7976931348623158e308}') $$, '22003',
                 'jobs.submit: payload holds a number beyond the IEEE-754 double range (greater than 1.7976931348623157e308 in magnitude)',
                 'payload number: just past the largest double -> 22003, saying why');
SELECT is(pg_temp.error_of($$ SELECT jobs.submit('lim_t', '{"a": [1, {"b": -1e309}]}') $$), '22003 jobs.submit hint=true',
          'payload number: a negative one, nested in an array -> 22003');
SELECT is(pg_temp.error_of(format('SELECT jobs.submit(%L, %L::jsonb)', 'lim_t', '{"a": ' || repeat('[', 62) || '1e400' || repeat(']', 62) || '}')),
          '22003 jobs.submit hint=true', 'payload number: at 64 levels deep -> 22003');
SELECT is(pg_temp.error_of(format('SELECT jobs.submit(%L, %L::jsonb)', 'lim_t', '{"n": 1' || repeat('0', 400) || '}')),
          '22003 jobs.submit hint=true', 'payload number: an integer of 401 digits -> 22003');
SELECT throws_ok($$ SELECT * FROM jobs.submit_many('[{"kind": "lim_t"}, {"kind": "lim_t", "payload": {"x": 1e400}}]') $$, '22003',
                 'jobs.submit_many: specs[1]: payload holds a number beyond the IEEE-754 double range (greater than 1.7976931348623157e308 in magnitude)',
                 'payload number: submit_many names the spec');
SELECT throws_ok($$ SELECT jobs.fan_out('[{"kind": "lim_t", "payload": {"x": 1e400}}]', '{"kind": "lim_t"}') $$, '22003',
                 'jobs.fan_out: children[0]: payload holds a number beyond the IEEE-754 double range (greater than 1.7976931348623157e308 in magnitude)',
                 'payload number: fan_out names the child');
SELECT is(pg_temp.error_of($$ SELECT jobs.fan_out('[]', '{"kind": "lim_t", "payload": {"x": -1e400}}') $$), '22003 jobs.fan_out hint=true',
          'payload number: fan_out checks the coordinator''s payload too');
SELECT is(pg_temp.totals(), (SELECT t FROM t5), 'payload number: every refused payload wrote no job and no event');
SELECT is((jobs.submit('lim_t', '{"max": 1.7976931348623157e308, "min": -1.7976931348623157e308, "tiny": 1e-400}')).payload,
          '{"max": 1.7976931348623157e308, "min": -1.7976931348623157e308, "tiny": 1e-400}'::jsonb,
          'payload number: the largest doubles (and a tiny number) are accepted as given');
SELECT is((jobs.submit('lim_t', jsonb_build_object('s', '1e5000', 'digits', repeat('9', 400)))).status, 'queued'::jobs.status,
          'payload number: such numbers written as strings are accepted');
SELECT is((SELECT count(*) FROM jobs.submit_many(jsonb_build_array(jsonb_build_object('kind', 'lim_t', 'payload',
              jsonb_build_object('n', repeat('1', 309)::numeric - 1, 'pad', repeat('x', 300)))))),
          1::bigint, 'payload number: a 309-digit number below the largest double is accepted');
SELECT is((SELECT count(*) FROM jobs.job WHERE payload ? 'max' OR payload ? 'digits' OR payload ? 'pad'), 3::bigint,
          'payload number: ... and written');

-- run_after: readable by every client, offsets PostgreSQL accepts.
CREATE TEMP TABLE t3 AS SELECT pg_temp.totals() AS t;
SELECT is(pg_temp.error_of($$ SELECT jobs.submit('lim_t', run_after => '10000-01-01') $$), '22023 jobs.submit hint=true',
          'run_after: year 10000 -> 22023 (no Python datetime holds it)');
SELECT is(pg_temp.error_of($$ SELECT jobs.submit('lim_t', run_after => '9999-12-30T00:00:00Z') $$), '22023 jobs.submit hint=true',
          'run_after: 9999-12-30T00:00:00Z -> 22023 (a reader east of UTC would see year 10000)');
SELECT is(pg_temp.error_of($$ SELECT * FROM jobs.submit_many('[{"kind": "lim_t", "run_after": "10000-01-01T00:00:00Z"}]') $$),
          '22023 jobs.submit_many hint=true', 'run_after: year 10000 in submit_many -> 22023');
SELECT throws_ok($$ SELECT * FROM jobs.submit_many('[{"kind": "lim_t", "run_after": "2030-01-01T00:00:00+16:00"}]') $$, '22023',
                 'jobs.submit_many: specs[0]: run_after "2030-01-01T00:00:00+16:00" is not a timestamp before 9999-12-30T00:00:00Z',
                 'run_after: a +16:00 offset in submit_many -> 22023 (not 22009)');
SELECT is(pg_temp.error_of($$ SELECT jobs.fan_out('[{"kind": "lim_t", "run_after": "2030-01-01T00:00:00-16:00"}]', '{"kind": "lim_t"}') $$),
          '22023 jobs.fan_out hint=true', 'run_after: a -16:00 offset in fan_out -> 22023');
SELECT is(pg_temp.error_of($$ SELECT * FROM jobs.submit_many('[{"kind": "lim_t", "run_after": "294277-01-01T00:00:00Z"}]') $$),
          '22023 jobs.submit_many hint=true', 'run_after: beyond PostgreSQL''s range -> 22023');
-- submit's run_after is a timestamptz: PostgreSQL converts the argument before the call.
SELECT is(pg_temp.error_of($$ SELECT jobs.submit('lim_t', run_after => '2030-01-01T00:00:00+16:00') $$),
          '22009 time zone displacement out of range hint=false',
          'run_after: a +16:00 offset given to submit -> 22009 from PostgreSQL''s timestamptz input, before jobs.submit runs');
SELECT is(pg_temp.totals(), (SELECT t FROM t3), 'run_after: refused values wrote no job and no event');
SELECT is((jobs.submit('lim_t', run_after => '9999-12-29T23:59:59Z')).run_after, '9999-12-29T23:59:59Z'::timestamptz,
          'run_after: 9999-12-29T23:59:59Z is accepted');
SELECT is((SELECT run_after FROM jobs.submit_many('[{"kind": "lim_t", "run_after": "2030-01-01T00:00:00+15:59"}]')),
          '2029-12-31T08:01:00Z'::timestamptz, 'run_after: a +15:59 offset is accepted');
SELECT is((jobs.submit('lim_t', run_after => '-infinity')).run_after, now(), 'run_after: the past (even -infinity) is still now()');

-- worker ids: printable, no surrounding whitespace.
DO $$ BEGIN PERFORM pg_temp.job('w', 'lim_t'); PERFORM pg_temp.snap(pg_temp.id('w')); END $$;
SELECT is(pg_temp.error_of($$ SELECT jobs.check_worker('jobs.claim', E'\t\t') $$), '22023 jobs.claim hint=true',
          'worker id: only tabs -> 22023');
SELECT is(pg_temp.error_of($$ SELECT jobs.check_worker('jobs.claim', 'a' || U&'\202E' || 'b') $$), '22023 jobs.claim hint=true',
          'worker id: a right-to-left override (U+202E) -> 22023');
SELECT throws_ok($$ SELECT jobs.check_worker('jobs.claim', 'a' || U&'\202E' || 'b') $$, '22023',
                 'jobs.claim: worker id contains the control or format character U+202E',
                 'worker id: ... naming the character');
SELECT is(pg_temp.error_of($$ SELECT jobs.check_worker('jobs.claim', ' w ') $$), '22023 jobs.claim hint=true',
          'worker id: '' w '' (surrounding spaces) -> 22023, not silently trimmed');
SELECT is(pg_temp.error_of($$ SELECT jobs.check_worker('jobs.claim', 'w' || U&'\3000') $$), '22023 jobs.claim hint=true',
          'worker id: a trailing ideographic space -> 22023');
SELECT is(pg_temp.error_of($$ SELECT jobs.check_worker('jobs.claim', E'host\n1') $$), '22023 jobs.claim hint=true',
          'worker id: a newline inside -> 22023');
SELECT is(pg_temp.error_of($$ SELECT jobs.check_worker('jobs.claim', 'w' || U&'\200B' || '1') $$), '22023 jobs.claim hint=true',
          'worker id: a zero-width space inside -> 22023');
SELECT is(pg_temp.error_of($$ SELECT jobs.check_worker('jobs.claim', 'w' || U&'\0085') $$), '22023 jobs.claim hint=true',
          'worker id: a C1 control (U+0085) -> 22023');
SELECT is(pg_temp.error_of(format('SELECT * FROM jobs.claim(%s, %L)', pg_temp.id('w'), E'\t\t')), '22023 jobs.claim hint=true',
          'worker id: claim refuses a worker id of tabs');
SELECT is(pg_temp.error_of(format('SELECT * FROM jobs.claim(%s, %L)', pg_temp.id('w'), ' w ')), '22023 jobs.claim hint=true',
          'worker id: claim refuses '' w ''');
SELECT is(pg_temp.state(pg_temp.id('w')), pg_temp.snapped(pg_temp.id('w')), 'worker id: refused claims changed nothing');
SELECT is(pg_temp.error_of($$ SELECT jobs.check_worker('jobs.claim', 'build host 7:pid-42/ü') $$), 'no error',
          'worker id: inner spaces and non-ASCII letters are accepted');
SELECT is((SELECT count(*) FROM jobs.claim(pg_temp.id('w'), 'host-ü:42')), 1::bigint, 'worker id: claim with a printable id works');
SELECT is((SELECT owned_by FROM jobs.job WHERE id = pg_temp.id('w')), 'host-ü:42', 'worker id: ... and records it');

SELECT * FROM finish();
ROLLBACK;
