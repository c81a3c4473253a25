-- jobs.fan_out: coordinator and children created atomically; the coordinator is claimable only
-- once every child is terminal (done or failed); the last child's outcome wakes it exactly once;
-- replay-safe through then_spec's idempotency_key; replaying a child re-blocks a coordinator
-- that has not run (docs/design.md §4, decisions "Ordering keys and fan-in").
BEGIN;
SELECT plan(58);

SELECT jobs.define_type('fo_child', queue => 'fo_cq', max_retries => 1);
SELECT jobs.define_type('fo_then', queue => 'fo_q');

CREATE TEMP VIEW counts AS
SELECT (SELECT count(*) FROM jobs.job) AS jobs_n, (SELECT count(*) FROM jobs.history) AS events_n,
       (SELECT md5(coalesce(string_agg(j::text, ',' ORDER BY j.id), '')) FROM jobs.job AS j) AS jobs_md5;

-- Claim a job as worker w and complete it; returns the outcome.
CREATE FUNCTION pg_temp.run_done(job bigint) RETURNS jobs.outcome LANGUAGE plpgsql AS $$
DECLARE v bigint;
BEGIN
    SELECT l.lease_version INTO STRICT v FROM jobs.claim(job, 'w') AS l;
    RETURN jobs.complete(job, 'w', v, '{"ok": true}');
END $$;
-- Claim a job as worker w and fail it; returns the outcome.
CREATE FUNCTION pg_temp.run_fail(job bigint, retryable boolean) RETURNS jobs.outcome LANGUAGE plpgsql AS $$
DECLARE v bigint;
BEGIN
    SELECT l.lease_version INTO STRICT v FROM jobs.claim(job, 'w') AS l;
    RETURN jobs.fail(job, 'w', v, 'boom', retryable);
END $$;

-- a fan-out with three children.
CREATE TEMP TABLE c_before AS SELECT * FROM counts;
CREATE TEMP TABLE coord AS
SELECT * FROM jobs.fan_out('[{"kind": "fo_child", "payload": {"part": 0}},
                             {"kind": "fo_child", "payload": {"part": 1}},
                             {"kind": "fo_child", "payload": {"part": 2}}]',
                           '{"kind": "fo_then", "payload": {"report": 9}, "idempotency_key": "fo-batch-1"}');
CREATE TEMP TABLE kids AS
SELECT j.id, row_number() OVER (ORDER BY j.id) - 1 AS part
  FROM jobs.job AS j WHERE j.parent_id = (SELECT id FROM coord);
SELECT is((SELECT (kind, queue, payload, status, pending_children, parent_id)::text FROM coord),
          ('fo_then', 'fo_q', '{"report": 9}'::jsonb, 'queued'::jobs.status, 3, NULL::bigint)::text,
          'fan_out: returns the coordinator: kind of then_spec, queued, pending_children 3');
SELECT is((SELECT coord::text FROM coord), (SELECT j::text FROM jobs.job AS j WHERE j.id = (SELECT id FROM coord)),
          'fan_out: the returned coordinator is the stored row');
SELECT is(ARRAY(SELECT (j.payload ->> 'part')::int FROM jobs.job AS j JOIN kids USING (id) ORDER BY j.id), ARRAY[0, 1, 2],
          'fan_out: three children point at the coordinator, in input order');
SELECT is(ARRAY(SELECT DISTINCT j.status::text FROM jobs.job AS j JOIN kids USING (id)), ARRAY['queued'],
          'fan_out: every child is queued');
SELECT is((SELECT (n.jobs_n - b.jobs_n, n.events_n - b.events_n)::text FROM counts AS n, c_before AS b), '(4,4)',
          'fan_out: four jobs and four submitted events (coordinator + three children)');
SELECT results_eq($$ SELECT id FROM jobs.children((SELECT id FROM coord)) $$, $$ SELECT id FROM kids ORDER BY id $$,
                  'fan_out: children() lists the three children by id');
SELECT is_empty($$ SELECT * FROM jobs.claim((SELECT id FROM coord), 'w') $$,
                'fan_out: the coordinator is not claimable by claim while children are pending');
SELECT is_empty($$ SELECT * FROM jobs.claim_many(ARRAY[(SELECT id FROM coord)], 'w') $$,
                'fan_out: ... nor by claim_many');
SELECT is_empty($$ SELECT * FROM jobs.claim_next('w', ARRAY['fo_q'], 10) $$,
                'fan_out: ... nor by claim_next on its queue');

-- children end one by one; only the last one's outcome wakes the coordinator.
CREATE TEMP TABLE outs (step text, o jobs.outcome);
INSERT INTO outs SELECT 'child 0 done', pg_temp.run_done((SELECT id FROM kids WHERE part = 0));
SELECT is((SELECT (o).wake FROM outs WHERE step = 'child 0 done'), '{}'::bigint[], 'fan_out: the first child done -> wake is empty');
SELECT is((SELECT pending_children FROM jobs.job WHERE id = (SELECT id FROM coord)), 2, 'fan_out: ... pending_children 2');
-- A retried child is not terminal.
INSERT INTO outs SELECT 'child 1 retried', pg_temp.run_fail((SELECT id FROM kids WHERE part = 1), true);
SELECT is((SELECT ((o).status, (o).wake)::text FROM outs WHERE step = 'child 1 retried'), ('queued', '{}'::bigint[])::text,
          'fan_out: a child failing with budget left is requeued and wakes nothing');
SELECT is((SELECT pending_children FROM jobs.job WHERE id = (SELECT id FROM coord)), 2,
          'fan_out: ... pending_children stays 2 (a requeued child is not terminal)');
UPDATE jobs.job SET run_after = now() WHERE id = (SELECT id FROM kids WHERE part = 1);
INSERT INTO outs SELECT 'child 1 failed', pg_temp.run_fail((SELECT id FROM kids WHERE part = 1), true);
SELECT is((SELECT ((o).status, (o).wake)::text FROM outs WHERE step = 'child 1 failed'), ('failed', '{}'::bigint[])::text,
          'fan_out: the second child fails for good (budget spent) -> failed, wake empty (one child left)');
SELECT is((SELECT pending_children FROM jobs.job WHERE id = (SELECT id FROM coord)), 1,
          'fan_out: ... a failed child counts as terminal: pending_children 1');
SELECT is_empty($$ SELECT * FROM jobs.claim_many(ARRAY[(SELECT id FROM coord)], 'w') $$,
                'fan_out: with one child pending the coordinator is still not claimable (claim_many)');
SELECT is_empty($$ SELECT * FROM jobs.claim_next('w', ARRAY['fo_q'], 10) $$,
                'fan_out: with one child pending claim_next does not hand out the coordinator');
SELECT is((SELECT (status, lease_version)::text FROM jobs.job WHERE id = (SELECT id FROM coord)), '(queued,0)',
          'fan_out: ... the coordinator is still queued at lease_version 0');
INSERT INTO outs SELECT 'child 2 done', pg_temp.run_done((SELECT id FROM kids WHERE part = 2));
SELECT is((SELECT (o).wake FROM outs WHERE step = 'child 2 done'), ARRAY[(SELECT id FROM coord)],
          'fan_out: the last child''s outcome wakes the coordinator');
SELECT is((SELECT count(*) FROM outs, unnest((o).wake) AS w WHERE w = (SELECT id FROM coord)), 1::bigint,
          'fan_out: the coordinator was named in exactly one outcome');
SELECT is((SELECT pending_children FROM jobs.job WHERE id = (SELECT id FROM coord)), 0, 'fan_out: ... pending_children 0');

-- now the coordinator runs and reads its children.
SELECT is((SELECT l.job_id FROM jobs.claim_next('w', ARRAY['fo_q']) AS l), (SELECT id FROM coord),
          'fan_out: once every child is terminal, claim_next hands out the coordinator');
SELECT is(ARRAY(SELECT status::text FROM jobs.children((SELECT id FROM coord))), ARRAY['done', 'failed', 'done'],
          'fan_out: children() shows each child''s final status');
SELECT is((SELECT count(*) FROM jobs.history WHERE job_id = (SELECT id FROM coord) AND reason = 'claimed'), 1::bigint,
          'fan_out: the coordinator was claimed once');

-- replay-safe through then_spec's idempotency_key.
CREATE TEMP TABLE c_replay AS SELECT * FROM counts;
CREATE TEMP TABLE coord_again AS
SELECT * FROM jobs.fan_out('[{"kind": "fo_child", "payload": {"part": 0}}, {"kind": "fo_child", "payload": {"part": 1}}]',
                           '{"kind": "fo_then", "payload": {"report": 10}, "idempotency_key": "fo-batch-1"}');
SELECT is((SELECT id FROM coord_again), (SELECT id FROM coord), 'fan_out: a repeated then_spec key returns the existing coordinator');
SELECT is((SELECT payload FROM coord_again), '{"report": 9}'::jsonb, 'fan_out: ... unchanged');
SELECT is((SELECT (jobs_n, events_n, jobs_md5)::text FROM counts), (SELECT (jobs_n, events_n, jobs_md5)::text FROM c_replay),
          'fan_out: ... and creates no child, no event and changes no row');
SELECT is((SELECT count(*) FROM jobs.children((SELECT id FROM coord))), 3::bigint, 'fan_out: the coordinator still has three children');

-- bad input -> nothing created.
SELECT jobs.submit('fo_child', '{}', 'fo-taken');
CREATE TEMP TABLE c_bad AS SELECT * FROM counts;
SELECT throws_ok($$ SELECT jobs.fan_out('[{"kind": "fo_child"}, {"kind": "fo_nope"}]', '{"kind": "fo_then", "idempotency_key": "fo-bad-1"}') $$,
                 'JB005', NULL, 'fan_out: an unknown kind in children[1] -> JB005');
SELECT throws_like($$ SELECT jobs.fan_out('[{"kind": "fo_child"}, {"kind": "fo_nope"}]', '{"kind": "fo_then"}') $$,
                   '%children[1]%', 'fan_out: ... the error names children[1]');
SELECT throws_ok($$ SELECT jobs.fan_out('[{"kind": "fo_child", "payload": 3}]', '{"kind": "fo_then"}') $$,
                 '22023', NULL, 'fan_out: a child payload that is not an object -> 22023');
SELECT throws_like($$ SELECT jobs.fan_out('[{"kind": "fo_child"}]', '{"kind": "fo_then", "paylod": {}}') $$,
                   '%then_spec%', 'fan_out: an unknown key in then_spec -> error naming then_spec');
SELECT throws_ok($$ SELECT jobs.fan_out('[{"kind": "fo_child"}]', '{"kind": "fo_then", "paylod": {}}') $$,
                 '22023', NULL, 'fan_out: ... with SQLSTATE 22023');
SELECT throws_ok($$ SELECT jobs.fan_out('[{"kind": "fo_child"}]', '{"kind": "fo_nope"}') $$,
                 'JB005', NULL, 'fan_out: an unknown coordinator kind -> JB005');
SELECT throws_ok($$ SELECT jobs.fan_out('{"kind": "fo_child"}', '{"kind": "fo_then"}') $$,
                 '22023', NULL, 'fan_out: children not an array -> 22023');
SELECT throws_ok($$ SELECT jobs.fan_out('[]', '[{"kind": "fo_then"}]') $$, '22023', NULL, 'fan_out: then_spec not an object -> 22023');
SELECT throws_ok($$ SELECT jobs.fan_out(NULL, '{"kind": "fo_then"}') $$, '22023', NULL, 'fan_out: NULL children -> 22023');
SELECT throws_ok($$ SELECT jobs.fan_out('[{"kind": "fo_child", "idempotency_key": "fo-taken"}]', '{"kind": "fo_then"}') $$,
                 '22023', NULL, 'fan_out: a child idempotency_key that already exists -> 22023 (a job belongs to one coordinator)');
SELECT is((SELECT (jobs_n, events_n, jobs_md5)::text FROM counts), (SELECT (jobs_n, events_n, jobs_md5)::text FROM c_bad),
          'fan_out: every rejected fan-out created nothing, not even the coordinator');
SELECT is((SELECT count(*) FROM jobs.job WHERE idempotency_key = 'fo-bad-1'), 0::bigint,
          'fan_out: the coordinator key of a rejected fan-out is free');

-- no children -> claimable at once.
CREATE TEMP TABLE lone AS SELECT * FROM jobs.fan_out('[]', '{"kind": "fo_then", "payload": {"lone": true}}');
SELECT is((SELECT pending_children FROM lone), 0, 'fan_out: [] children -> pending_children 0');
SELECT is((SELECT count(*) FROM jobs.claim((SELECT id FROM lone), 'w')), 1::bigint, 'fan_out: [] children -> the coordinator is claimable at once');

-- all children completed in one complete_many: the coordinator is woken once.
CREATE TEMP TABLE coord2 AS
SELECT * FROM jobs.fan_out('[{"kind": "fo_child"}, {"kind": "fo_child"}, {"kind": "fo_child"}]', '{"kind": "fo_then"}');
CREATE TEMP TABLE leases2 AS
SELECT * FROM jobs.claim_many(ARRAY(SELECT id FROM jobs.job WHERE parent_id = (SELECT id FROM coord2)), 'w2');
SELECT is((SELECT count(*) FROM leases2), 3::bigint, 'fan_out: claim_many takes the three children');
CREATE TEMP TABLE outs2 AS
SELECT * FROM jobs.complete_many(ARRAY(SELECT job_id FROM leases2 ORDER BY job_id), 'w2',
                                 ARRAY(SELECT lease_version FROM leases2 ORDER BY job_id), NULL);
SELECT is((SELECT count(*) FROM outs2, unnest(wake) AS w WHERE w = (SELECT id FROM coord2)), 1::bigint,
          'fan_out: completing every child in one complete_many names the coordinator exactly once');
SELECT is((SELECT count(*) FROM jobs.claim((SELECT id FROM coord2), 'w')), 1::bigint, 'fan_out: ... and it is claimable');

-- replaying a child re-blocks a coordinator that has not run; cancelling a child ends it.
CREATE TEMP TABLE coord3 AS SELECT * FROM jobs.fan_out('[{"kind": "fo_child"}, {"kind": "fo_child"}]', '{"kind": "fo_then"}');
CREATE TEMP TABLE kids3 AS SELECT id, row_number() OVER (ORDER BY id) AS n FROM jobs.job WHERE parent_id = (SELECT id FROM coord3);
SELECT is((jobs.cancel((SELECT id FROM kids3 WHERE n = 1))).wake, '{}'::bigint[], 'fan_out: cancelling one of two children wakes nothing');
SELECT is((pg_temp.run_fail((SELECT id FROM kids3 WHERE n = 2), false)).wake, ARRAY[(SELECT id FROM coord3)],
          'fan_out: the other child failing (not retryable) wakes the coordinator: cancelled and failed children are terminal');
SELECT is(jobs.replay((SELECT id FROM kids3 WHERE n = 2)), true, 'fan_out: a failed child can be replayed');
SELECT is((SELECT pending_children FROM jobs.job WHERE id = (SELECT id FROM coord3)), 1,
          'fan_out: replaying a child of a coordinator that has not run adds it back: pending_children 1');
SELECT is_empty($$ SELECT * FROM jobs.claim((SELECT id FROM coord3), 'w') $$,
                'fan_out: ... and the coordinator is not claimable again');
SELECT is((pg_temp.run_done((SELECT id FROM kids3 WHERE n = 2))).wake, ARRAY[(SELECT id FROM coord3)],
          'fan_out: the replayed child ending wakes the coordinator again');
SELECT is((SELECT count(*) FROM jobs.claim((SELECT id FROM coord3), 'w')), 1::bigint, 'fan_out: ... which is then claimable');

SELECT jobs.define_type('fo_clash');
SELECT throws_ok($$ SELECT jobs.fan_out('[{"kind": "fo_clash"}, {"kind": "fo_clash", "ordering_key": "same"}]',
                                        '{"kind": "fo_clash", "ordering_key": "same"}') $$,
                 '22023', 'jobs.fan_out: children[1] has the coordinator''s ordering_key same',
                 'fan_out: a child with the coordinator''s ordering_key -> 22023 (they would wait on each other forever)');
SELECT is((SELECT count(*) FROM jobs.job WHERE kind = 'fo_clash'), 0::bigint,
          'fan_out: the rejected fan-out created nothing');
SELECT lives_ok($$ SELECT jobs.fan_out('[{"kind": "fo_clash", "ordering_key": "other"}]',
                                       '{"kind": "fo_clash", "ordering_key": "same"}') $$,
                'fan_out: children with another ordering_key than the coordinator are fine');

-- two children sharing a key would be one job: refused by position, nothing created.
CREATE TEMP TABLE fo_before AS SELECT count(*) AS n FROM jobs.job;
SELECT throws_ok($$ SELECT jobs.fan_out('[{"kind": "fo_child", "idempotency_key": "k"}, {"kind": "fo_child"},
                                          {"kind": "fo_child", "idempotency_key": "k"}]', '{"kind": "fo_then"}') $$,
                 '22023', 'jobs.fan_out: children[0] and children[2] have the same kind and idempotency_key ''k''',
                 'fan_out: two children with one idempotency_key -> 22023 naming both positions');
SELECT is((SELECT count(*) FROM jobs.job), (SELECT n FROM fo_before), 'fan_out: the refused fan-out created nothing');
SELECT isnt_empty($$ SELECT jobs.fan_out('[{"kind": "fo_child", "idempotency_key": "k1"}, {"kind": "fo_child", "idempotency_key": "k2"}]',
                                         '{"kind": "fo_then"}') $$,
                  'fan_out: distinct keys on the children are fine');

SELECT * FROM finish();
ROLLBACK;
