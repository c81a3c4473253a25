-- pgTAP tests for priorities: jobs.define_type(priority), jobs.submit(priority), spec "priority"
-- in submit_many and fan_out, the claim_next order, and the priority every signal carries.
-- Contract: docs/sql-api.md "Priorities".
BEGIN;
SELECT plan(25);
\ir helpers/lease_helpers.psql

CREATE FUNCTION pg_temp.prio(text, integer, timestamptz DEFAULT NULL) RETURNS bigint LANGUAGE sql
    AS $$ INSERT INTO ids SELECT $1, (jobs.submit('tc.pr.a', '{}', NULL, $3, NULL, false, $2)).id RETURNING id $$;

DO $$ BEGIN
    PERFORM jobs.define_type('tc.pr.a', queue => 'tc.pr.q');
    PERFORM jobs.define_type('tc.pr.low', queue => 'tc.pr.q', priority => 7);
END $$;

-- defaults and validation
SELECT is((SELECT priority FROM jobs.job_type WHERE kind = 'tc.pr.a'), 0::smallint,
    'priority: a kind defaults to priority 0 (runs first)');
SELECT is((SELECT priority FROM jobs.job_type WHERE kind = 'tc.pr.low'), 7::smallint,
    'priority: define_type(priority => 7) is stored');
SELECT throws_ok($$ SELECT jobs.define_type('tc.pr.bad', priority => 10) $$, '22023', NULL,
    'priority: define_type(priority => 10) -> 22023');
SELECT throws_ok($$ SELECT jobs.define_type('tc.pr.bad', priority => -1) $$, '22023', NULL,
    'priority: define_type(priority => -1) -> 22023');
SELECT throws_ok($$ SELECT jobs.define_type('tc.pr.bad', priority => NULL) $$, '22023', NULL,
    'priority: define_type(priority => NULL) -> 22023');
SELECT is((SELECT (jobs.submit('tc.pr.low', notify => false)).priority), 7::smallint,
    'priority: a submit without one takes the kind''s');
SELECT is((SELECT (jobs.submit('tc.pr.low', notify => false, priority => 2)).priority), 2::smallint,
    'priority: submit(priority => 2) overrides the kind''s');
SELECT throws_ok($$ SELECT jobs.submit('tc.pr.a', priority => 10) $$, '22023', NULL,
    'priority: submit(priority => 10) -> 22023');
SELECT throws_like($$ SELECT jobs.submit('tc.pr.a', priority => -3) $$, '%priority must be an integer from 0 to 9%',
    'priority: the 22023 message says the range');
SELECT throws_ok($$ SELECT * FROM jobs.submit_many('[{"kind": "tc.pr.a", "priority": 1.5}]') $$, '22023', NULL,
    'priority: a fractional priority in a spec -> 22023');
SELECT throws_ok($$ SELECT * FROM jobs.submit_many('[{"kind": "tc.pr.a", "priority": "1"}]') $$, '22023', NULL,
    'priority: a string priority in a spec -> 22023');
SELECT throws_like($$ SELECT * FROM jobs.submit_many('[{"kind": "tc.pr.a"}, {"kind": "tc.pr.a", "priority": 12}]') $$,
    '%specs[1]%priority%', 'priority: the error names the spec');
SELECT results_eq($$ SELECT priority FROM jobs.submit_many('[{"kind": "tc.pr.a", "priority": 4, "notify": false},
                                                            {"kind": "tc.pr.low", "priority": null, "notify": false}]') $$,
    $$ VALUES (4::smallint), (7::smallint) $$,
    'priority: submit_many specs carry their priority, null takes the kind''s');
SELECT is((SELECT count(*) FROM jobs.job WHERE kind = 'tc.pr.a' AND priority NOT IN (0, 4)), 0::bigint,
    'priority: rejected calls wrote nothing');

-- claim_next: lowest value first, then oldest due, then id
DO $$ BEGIN
    DELETE FROM jobs.event; DELETE FROM jobs.job;
    PERFORM pg_temp.prio('p5_old', 5);
    PERFORM pg_temp.prio('p0_new', 0);
    PERFORM pg_temp.prio('p5_new', 5);
    PERFORM pg_temp.prio('p2', 2);
    PERFORM pg_temp.prio('p0_later', 0, now() + interval '1 hour');
    UPDATE jobs.job SET run_after = now() - interval '1 hour' WHERE id = pg_temp.id('p5_old');
END $$;
SELECT results_eq($$ SELECT job_id FROM jobs.claim_next('w1', ARRAY['tc.pr.q'], 1) $$,
    $$ VALUES (pg_temp.id('p0_new')) $$,
    'priority: claim_next takes priority 0 before an older priority 5 job');
SELECT bag_eq($$ SELECT job_id FROM jobs.claim_next('w1', ARRAY['tc.pr.q'], 2) $$,
    $$ VALUES (pg_temp.id('p2')), (pg_temp.id('p5_old')) $$,
    'priority: then 2, then the older of the two 5s (oldest due first)');
SELECT results_eq($$ SELECT job_id FROM jobs.claim_next('w1', ARRAY['tc.pr.q'], 10) $$,
    $$ VALUES (pg_temp.id('p5_new')) $$,
    'priority: then the last 5; the priority 0 job not due yet is left');
SELECT is((SELECT status FROM jobs.job WHERE id = pg_temp.id('p0_later')), 'queued'::jobs.status,
    'priority: a high-priority job not yet due is not claimed');

-- claim_next across queues and without naming one: the same order
DO $$ BEGIN
    PERFORM jobs.define_type('tc.pr.b', queue => 'tc.pr.qb');
    INSERT INTO ids SELECT 'qb3', (jobs.submit('tc.pr.b', notify => false, priority => 3)).id;
    INSERT INTO ids SELECT 'qb1', (jobs.submit('tc.pr.b', notify => false, priority => 1)).id;
    PERFORM pg_temp.prio('qa2', 2);
END $$;
SELECT results_eq($$ SELECT job_id FROM jobs.claim_next('w1', NULL, 2) $$,
    $$ VALUES (pg_temp.id('qb1')), (pg_temp.id('qa2')) $$,
    'priority: claim_next over every queue takes the two most urgent (lease rows ordered by id)');

-- the index serves the order: no sort of the backlog
CREATE TEMP TABLE plan_lines (line text);
DO $$
DECLARE l text;
BEGIN
    FOR l IN EXECUTE $q$ EXPLAIN SELECT c.id FROM jobs.claimable AS c
                          WHERE c.status = 'queued' AND c.queue = 'tc.pr.q'
                          ORDER BY c.priority, c.run_after, c.id LIMIT 10 FOR UPDATE SKIP LOCKED $q$ LOOP
        INSERT INTO plan_lines VALUES (l);
    END LOOP;
END $$;
SELECT ok(EXISTS (SELECT 1 FROM plan_lines WHERE line LIKE '%Index Scan using job_queued_by_queue_idx%')
          AND NOT EXISTS (SELECT 1 FROM plan_lines WHERE line ~ '^\s*(->\s*)?Sort'),
    'priority: claim_next''s per-queue read is an index scan in (priority, run_after, id) order, no sort');

-- signals carry the priority (the Redis band)
DO $$ BEGIN
    PERFORM pg_temp.prio('sig7', 7);
END $$;
SELECT results_eq($$ SELECT job_id, priority FROM jobs.signals(ARRAY[pg_temp.id('sig7')]) $$,
    $$ VALUES (pg_temp.id('sig7'), 7::smallint) $$, 'priority: jobs.signals carries the priority');
SELECT ok((SELECT bool_and(s.priority = j.priority) FROM jobs.stale_queued('tc.pr.q', '0 seconds') AS s
             JOIN jobs.job AS j ON j.id = s.job_id), 'priority: jobs.stale_queued carries each job''s priority');
SELECT results_eq($$ SELECT job_id FROM jobs.stale_queued('tc.pr.q', '0 seconds') $$,
    $$ SELECT id FROM jobs.job WHERE queue = 'tc.pr.q' AND status = 'queued' AND run_after <= now()
        ORDER BY id $$,
    'priority: stale_queued keeps id order (the audit merges it by id); the band is in each row');
SELECT is((SELECT priority FROM jobs.fan_out('[{"kind": "tc.pr.a", "priority": 6}]',
                                             '{"kind": "tc.pr.a", "priority": 1}')), 1::smallint,
    'priority: fan_out''s then_spec carries its priority');
SELECT is((SELECT max(priority) FROM jobs.job WHERE parent_id IS NOT NULL), 6::smallint,
    'priority: fan_out''s children carry theirs');

SELECT * FROM finish();
ROLLBACK;
