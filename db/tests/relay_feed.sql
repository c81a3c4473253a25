-- pgTAP tests for jobs.configure_relay and jobs.poll_submitted: how submits reach the relay.
-- Contract: docs/sql-api.md (configure_relay, poll_submitted); why the reading misses no job:
-- docs/design.md §6. One session can only show the single-session half: a stretch this
-- transaction drew into is never final inside it (py/tests/test_relay_table.py races them).
BEGIN;
SELECT plan(14);

SELECT is((SELECT relay_source FROM jobs.configure_relay()), 'notify', 'configure_relay: submits notify by default');
SELECT is((SELECT read_upto FROM jobs.configure_relay()), NULL, 'configure_relay: and the table is not read');
SELECT is_empty($$ SELECT * FROM jobs.poll_submitted() $$, 'poll_submitted: nothing while submits notify');
SELECT is((SELECT horizon_id FROM jobs.relay_feed), NULL, 'poll_submitted: and it takes no horizon');

SELECT throws_ok($$ SELECT * FROM jobs.configure_relay('redis') $$, '22023', NULL,
    'configure_relay: a source other than notify or table -> 22023');
SELECT throws_ok($$ SELECT * FROM jobs.poll_submitted(0) $$, '22023', NULL, 'poll_submitted: max_ids 0 -> 22023');
SELECT throws_ok($$ SELECT * FROM jobs.poll_submitted(100001) $$, '22023', NULL, 'poll_submitted: max_ids over 100000 -> 22023');
SELECT throws_ok($$ SELECT * FROM jobs.poll_submitted(NULL) $$, '22023', NULL, 'poll_submitted: max_ids NULL -> 22023');

SELECT jobs.define_type('tc.feed');
SELECT jobs.submit('tc.feed');
SELECT is((SELECT read_upto FROM jobs.configure_relay('table')),
          (SELECT last_value FROM jobs.job_id_seq),
          'configure_relay: switching to table starts the reading at the last id drawn');
SELECT jobs.submit('tc.feed');
SELECT is_empty($$ SELECT * FROM jobs.poll_submitted() $$,
    'poll_submitted: a stretch this transaction drew into is not final inside it');
SELECT is((SELECT horizon_id FROM jobs.relay_feed), (SELECT last_value FROM jobs.job_id_seq),
    'poll_submitted: its horizon is the last id drawn');
SELECT is((SELECT read_upto FROM jobs.relay_feed), (SELECT last_value FROM jobs.job_id_seq) - 1,
    'poll_submitted: and nothing past the reading is read yet');

-- Back to notify with the stretch unread: the reading stays until it is read.
SELECT is((SELECT read_upto FROM jobs.configure_relay('notify')), (SELECT last_value FROM jobs.job_id_seq) - 1,
    'configure_relay: switching back keeps an unread stretch to read');
SELECT ok((SELECT prosecdef FROM pg_proc WHERE oid = 'jobs.poll_submitted(integer)'::regprocedure)
          AND NOT has_function_privilege('jobs_producer', 'jobs.poll_submitted(integer)', 'EXECUTE')
          AND NOT has_function_privilege('jobs_worker', 'jobs.configure_relay(text)', 'EXECUTE')
          AND has_function_privilege('jobs_admin', 'jobs.poll_submitted(integer)', 'EXECUTE'),
    'poll_submitted and configure_relay: jobs_admin only');

SELECT * FROM finish();
ROLLBACK;
