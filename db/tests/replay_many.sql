-- pgTAP tests for jobs.replay_many: bulk dead-letter re-drive in one transaction, by kind,
-- error pattern and failure time, bounded, returning what to signal.
-- Contract: docs/sql-api.md "replay_many".
BEGIN;
SELECT plan(21);
\ir helpers/lease_helpers.psql

DO $$ BEGIN
    PERFORM jobs.define_type('tc.rm', max_retries => 0);
    PERFORM jobs.define_type('tc.rm.other', max_retries => 0);
    PERFORM pg_temp.running('a', 'tc.rm', 'w1');
    PERFORM jobs.fail(pg_temp.id('a'), 'w1', 1, 'timeout talking to bank');
    PERFORM pg_temp.running('b', 'tc.rm', 'w1');
    PERFORM jobs.fail(pg_temp.id('b'), 'w1', 1, 'card declined');
    PERFORM pg_temp.running('c', 'tc.rm', 'w1');
    PERFORM jobs.fail(pg_temp.id('c'), 'w1', 1, 'timeout talking to bank');
    PERFORM pg_temp.running('o', 'tc.rm.other', 'w1');
    PERFORM jobs.fail(pg_temp.id('o'), 'w1', 1, 'timeout talking to bank');
    PERFORM pg_temp.running('d', 'tc.rm', 'w1');
    PERFORM jobs.complete(pg_temp.id('d'), 'w1', 1);
    PERFORM pg_temp.elapse(pg_temp.id('a'), interval '2 hours');
END $$;

SELECT results_eq($$ SELECT job_id, queue FROM jobs.replay_many('tc.rm', error_like => 'timeout%', max_jobs => 1) $$,
    $$ VALUES (pg_temp.id('a'), 'default'::text) $$, 'replay_many: max_jobs bounds it, oldest failure first');
SELECT results_eq($$ SELECT job_id FROM jobs.replay_many('tc.rm', error_like => 'timeout%') $$,
    $$ VALUES (pg_temp.id('c')) $$, 'replay_many: the next call takes what is left of the match (not the declined card)');
SELECT results_eq($$ SELECT status, retry_count, lease_version FROM jobs.job WHERE id IN (pg_temp.id('a'), pg_temp.id('c')) ORDER BY id $$,
    $$ VALUES ('queued'::jobs.status, 0, 2::bigint), ('queued'::jobs.status, 0, 2::bigint) $$,
    'replay_many: replayed jobs are queued with a fresh budget and lease_version + 1');
SELECT is(pg_temp.last_event(pg_temp.id('c')), '(failed,queued,2,,replayed,"timeout talking to bank")',
    'replay_many: a replayed event per job, the error kept');
SELECT results_eq($$ SELECT status FROM jobs.job WHERE id IN (pg_temp.id('b'), pg_temp.id('o'), pg_temp.id('d')) ORDER BY id $$,
    $$ VALUES ('failed'::jobs.status), ('failed'::jobs.status), ('done'::jobs.status) $$,
    'replay_many: other errors, other kinds and done jobs untouched');

DO $$ BEGIN PERFORM pg_temp.elapse(pg_temp.id('b'), interval '2 hours'); END $$;
SELECT is_empty($$ SELECT * FROM jobs.replay_many(NULL, failed_since => now() - interval '1 hour', error_like => 'card%') $$,
    'replay_many: failed_since leaves older failures alone');
SELECT results_eq($$ SELECT job_id FROM jobs.replay_many(NULL) ORDER BY job_id $$,
    $$ VALUES (pg_temp.id('b')), (pg_temp.id('o')) $$, 'replay_many: kind NULL -> every kind');

-- fan-in: a replayed child makes its waiting coordinator wait again
DO $$ DECLARE coord bigint; BEGIN
    coord := (jobs.fan_out('[{"kind": "tc.rm"}, {"kind": "tc.rm"}]', '{"kind": "tc.rm.other"}')).id;
    INSERT INTO ids VALUES ('coord', coord);
    PERFORM jobs.claim(j.id, 'w5') FROM jobs.job AS j WHERE j.parent_id = coord;
    PERFORM jobs.fail(j.id, 'w5', 1, 'child broke') FROM jobs.job AS j WHERE j.parent_id = coord;
END $$;
SELECT is((SELECT pending_children FROM jobs.job WHERE id = pg_temp.id('coord')), 0, 'replay_many: setup -> both children failed');
SELECT is((SELECT count(*) FROM jobs.replay_many('tc.rm', error_like => 'child broke')), 2::bigint, 'replay_many: both children replayed');
SELECT is((SELECT pending_children FROM jobs.job WHERE id = pg_temp.id('coord')), 2, 'replay_many: the coordinator counts both again');

-- A coordinator replayed in the same call as its child waits for that child again: the
-- child is counted into it even though the coordinator's own row is re-queued by the call.
DO $$ DECLARE coord bigint; kid bigint; BEGIN
    coord := (jobs.fan_out('[{"kind": "tc.rm"}, {"kind": "tc.rm"}]', '{"kind": "tc.rm.other"}')).id;
    INSERT INTO ids VALUES ('coord2', coord);
    PERFORM jobs.claim(j.id, 'w6') FROM jobs.job AS j WHERE j.parent_id = coord;
    SELECT min(j.id) INTO kid FROM jobs.job AS j WHERE j.parent_id = coord;
    INSERT INTO ids VALUES ('kid2', kid);
    PERFORM jobs.fail(kid, 'w6', 1, 'pair broke');
    PERFORM jobs.complete(j.id, 'w6', 1) FROM jobs.job AS j WHERE j.parent_id = coord AND j.id <> kid;
    PERFORM jobs.claim(coord, 'w6');
    PERFORM jobs.fail(coord, 'w6', 1, 'pair broke');
END $$;
SELECT results_eq($$ SELECT status::text, pending_children FROM jobs.job WHERE id = pg_temp.id('coord2') $$,
    $$ VALUES ('failed', 0) $$, 'replay_many: setup -> the coordinator and one child failed');
SELECT is((SELECT count(*) FROM jobs.replay_many(NULL, error_like => 'pair broke')), 2::bigint,
    'replay_many: the coordinator and its child replayed together');
SELECT results_eq($$ SELECT status::text, pending_children FROM jobs.job WHERE id = pg_temp.id('coord2') $$,
    $$ VALUES ('queued', 1) $$, 'replay_many: the coordinator replayed with its child waits for the child');

SELECT throws_ok($$ SELECT * FROM jobs.replay_many('tc.rm', max_jobs => 0) $$, '22023', NULL, 'replay_many: max_jobs 0 -> 22023');
-- Bad filters are refused before any row is read: the same answer with no failed job as with
-- one whose error the pattern reaches the end of (where LIKE itself would raise 22025).
DELETE FROM jobs.job WHERE status = 'failed';
SELECT throws_ok($$ SELECT * FROM jobs.replay_many(NULL, error_like => 'x\') $$, '22023',
    'jobs.replay_many: error_like ends with the escape character \, which escapes nothing',
    'replay_many: a pattern ending in a lone escape character -> 22023 with no failed job');
SELECT throws_ok($$ SELECT * FROM jobs.replay_many('Bad Kind') $$, '22023',
    'jobs.replay_many: kind ''Bad Kind'' is malformed', 'replay_many: a malformed kind -> 22023 with no failed job');
DO $$
DECLARE
    doomed bigint := (SELECT s.id FROM jobs.submit('tc.rm', '{}') AS s);
BEGIN
    PERFORM jobs.claim(doomed, 'w7');
    PERFORM jobs.fail(doomed, 'w7', 1, 'x', retryable => false);
END $$;
SELECT throws_ok($$ SELECT * FROM jobs.replay_many(NULL, error_like => 'x\') $$, '22023', NULL,
    'replay_many: ... and the same with a failed job the pattern reaches the end of');
SELECT is((SELECT count(*) FROM jobs.replay_many(NULL, error_like => 'x\\')), 0::bigint,
    'replay_many: a doubled backslash matches a literal one (none here), and is no error');
SELECT is((SELECT count(*) FROM jobs.replay_many('tc.rm', error_like => 'x')), 1::bigint,
    'replay_many: the failed job replays once the filters are well formed');
SELECT throws_ok($$ SELECT * FROM jobs.replay_many(NULL, error_like => repeat('x', 4097)) $$, '22023', NULL,
    'replay_many: an error_like over 4096 bytes -> 22023');
SELECT is_empty($$ SELECT * FROM jobs.audit() WHERE violations > 0 $$, 'replay_many: jobs.audit finds every replay legal');

SELECT * FROM finish();
ROLLBACK;
