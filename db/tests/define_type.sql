-- jobs.define_type: defaults, upsert replacing the whole definition, validation (22023, nothing
-- changed), and a changed definition applying to new jobs only (docs/design.md §3, decisions "Names").
BEGIN;
SELECT plan(60);

CREATE TEMP VIEW dt AS
SELECT kind, queue, lease_timeout, timeout, max_retries, backoff_base, backoff_max, max_payload_bytes,
       slo_latency, slo_target
  FROM jobs.job_type;

-- defaults.
CREATE TEMP TABLE first_def AS SELECT * FROM jobs.define_type('dt_a');
SELECT is((SELECT (queue, lease_timeout, timeout, max_retries, backoff_base, backoff_max, max_payload_bytes,
                   slo_latency, slo_target)::text FROM dt WHERE kind = 'dt_a'),
          ('default', interval '15 seconds', interval '30 seconds', 3, interval '1 second', interval '5 minutes',
           262144, interval '25 seconds', 0.95)::text,
          'define_type: only a kind -> queue default, lease 15 s, timeout 30 s, 3 retries, backoff 1 s..5 min, 262144 bytes, SLO 25 s at 0.95');
SELECT is((SELECT (kind, queue, lease_timeout, timeout, max_retries, backoff_base, backoff_max, max_payload_bytes,
                   slo_latency, slo_target)::text FROM first_def),
          (SELECT dt::text FROM dt WHERE kind = 'dt_a'),
          'define_type: returns the stored definition');
SELECT is((SELECT count(*) FROM jobs.job_type WHERE kind = 'dt_a'), 1::bigint, 'define_type: one row per kind');
SELECT is((jobs.define_type('dt_b', 'reports', '5 seconds', '2 minutes', 0, '3 seconds', '1 minute', 1024,
                            '10 seconds', 0.5)).queue, 'reports',
          'define_type: every argument can be passed positionally');

-- the upsert replaces the whole definition; omitted arguments take their defaults.
SELECT jobs.define_type('dt_a', queue => 'q1', max_retries => 5, timeout => '1 minute', max_payload_bytes => 100,
                        backoff_base => '2 seconds', backoff_max => '10 seconds', slo_target => 0.99);
SELECT is((SELECT (queue, timeout, max_retries, max_payload_bytes, backoff_base, backoff_max, slo_target)::text
             FROM dt WHERE kind = 'dt_a'),
          ('q1', interval '1 minute', 5, 100, interval '2 seconds', interval '10 seconds', 0.99)::text,
          'define_type: a second call with named arguments updates the definition');
SELECT is((jobs.define_type('dt_a', lease_timeout => '20 seconds')).lease_timeout, interval '20 seconds',
          'define_type: a third call sets lease_timeout');
SELECT is((SELECT (queue, lease_timeout, timeout, max_retries, backoff_base, backoff_max, max_payload_bytes,
                   slo_latency, slo_target)::text FROM dt WHERE kind = 'dt_a'),
          ('default', interval '20 seconds', interval '30 seconds', 3, interval '1 second', interval '5 minutes',
           262144, interval '25 seconds', 0.95)::text,
          'define_type: upsert replaces the whole definition: omitted arguments fall back to their defaults');
SELECT is((SELECT count(*) FROM jobs.job_type WHERE kind = 'dt_a'), 1::bigint, 'define_type: upsert keeps one row per kind');

-- boundaries that are accepted.
SELECT is((jobs.define_type('dt_c', max_retries => 0)).max_retries, 0, 'define_type: max_retries 0 is accepted');
SELECT is((jobs.define_type('dt_c', max_retries => 1000, slo_target => 0.9999, backoff_base => '1 minute',
                            backoff_max => '1 minute')).max_retries, 1000,
          'define_type: max_retries 1000, slo_target 0.9999 and backoff_max = backoff_base are accepted');
SELECT is((jobs.define_type('A' || repeat('b', 127))).kind, 'A' || repeat('b', 127), 'define_type: a 128-character kind is accepted');
SELECT is((jobs.define_type('9a_b.c:d/e-f', queue => 'Q-1_x.y:z/w')).queue, 'Q-1_x.y:z/w',
          'define_type: kind and queue may use letters, digits and _ . : / -');

-- validation -> 22023, nothing changed.
CREATE TEMP TABLE before_types AS SELECT * FROM jobs.job_type;
SELECT throws_ok($$ SELECT jobs.define_type(NULL) $$, '22023', NULL, 'define_type: NULL kind -> 22023');
SELECT throws_ok($$ SELECT jobs.define_type('') $$, '22023', NULL, 'define_type: empty kind -> 22023');
SELECT throws_ok($$ SELECT jobs.define_type('has space') $$, '22023', NULL, 'define_type: kind with a space -> 22023');
SELECT throws_ok($$ SELECT jobs.define_type('{dt}') $$, '22023', NULL, 'define_type: kind with braces -> 22023');
SELECT throws_ok($$ SELECT jobs.define_type('-dt') $$, '22023', NULL, 'define_type: kind starting with - -> 22023');
SELECT throws_ok($$ SELECT jobs.define_type('a' || repeat('b', 128)) $$, '22023', NULL, 'define_type: 129-character kind -> 22023');
SELECT throws_ok($$ SELECT jobs.define_type('dt_a', queue => NULL) $$, '22023', NULL, 'define_type: NULL queue -> 22023');
SELECT throws_ok($$ SELECT jobs.define_type('dt_a', queue => 'a{b}') $$, '22023', NULL, 'define_type: queue with braces (Redis hash tag) -> 22023');
SELECT throws_ok($$ SELECT jobs.define_type('dt_a', queue => 'my queue') $$, '22023', NULL, 'define_type: queue with a space -> 22023');
SELECT throws_ok($$ SELECT jobs.define_type('dt_a', queue => '') $$, '22023', NULL, 'define_type: empty queue -> 22023');
SELECT throws_ok($$ SELECT jobs.define_type('dt_a', lease_timeout => '0 seconds') $$, '22023', NULL, 'define_type: zero lease_timeout -> 22023');
SELECT throws_ok($$ SELECT jobs.define_type('dt_a', lease_timeout => '-5 seconds') $$, '22023', NULL, 'define_type: negative lease_timeout -> 22023');
SELECT throws_ok($$ SELECT jobs.define_type('dt_a', lease_timeout => NULL) $$, '22023', NULL, 'define_type: NULL lease_timeout -> 22023');
SELECT throws_ok($$ SELECT jobs.define_type('dt_a', timeout => '0 seconds') $$, '22023', NULL, 'define_type: zero timeout -> 22023');
SELECT throws_ok($$ SELECT jobs.define_type('dt_a', max_retries => -1) $$, '22023', NULL, 'define_type: max_retries -1 -> 22023');
SELECT throws_ok($$ SELECT jobs.define_type('dt_a', max_retries => 1001) $$, '22023', NULL, 'define_type: max_retries 1001 -> 22023');
SELECT throws_ok($$ SELECT jobs.define_type('dt_a', max_retries => NULL) $$, '22023', NULL, 'define_type: NULL max_retries -> 22023');
SELECT throws_ok($$ SELECT jobs.define_type('dt_a', backoff_base => '0 seconds') $$, '22023', NULL, 'define_type: zero backoff_base -> 22023');
SELECT throws_ok($$ SELECT jobs.define_type('dt_a', backoff_base => '10 seconds', backoff_max => '5 seconds') $$, '22023', NULL,
                 'define_type: backoff_max below backoff_base -> 22023');
SELECT throws_ok($$ SELECT jobs.define_type('dt_a', max_payload_bytes => 0) $$, '22023', NULL, 'define_type: max_payload_bytes 0 -> 22023');
SELECT throws_ok($$ SELECT jobs.define_type('dt_a', slo_latency => '0 seconds') $$, '22023', NULL, 'define_type: zero slo_latency -> 22023');
SELECT throws_ok($$ SELECT jobs.define_type('dt_a', slo_target => 0) $$, '22023', NULL, 'define_type: slo_target 0 -> 22023');
SELECT throws_ok($$ SELECT jobs.define_type('dt_a', slo_target => 1.5) $$, '22023', NULL, 'define_type: slo_target 1.5 -> 22023');
SELECT throws_ok($$ SELECT jobs.define_type('dt_a', slo_target => 1) $$, '22023', NULL, 'define_type: slo_target 1 (no error budget) -> 22023');
SELECT throws_like($$ SELECT jobs.define_type('dt_a', max_retries => -1) $$, '%define_type%',
                   'define_type: the error message names the function');
SELECT set_eq($$ SELECT * FROM jobs.job_type $$, $$ SELECT * FROM before_types $$,
              'define_type: rejected definitions changed no job type (dt_a keeps its definition, nothing added)');

-- a changed definition applies to new jobs only.
SELECT jobs.define_type('dt_job', queue => 'q_old', lease_timeout => '15 seconds', timeout => '30 seconds', max_retries => 3);
CREATE TEMP TABLE old_job AS SELECT * FROM jobs.submit('dt_job', '{"n": 1}');
SELECT jobs.define_type('dt_job', queue => 'q_new', lease_timeout => '5 seconds', timeout => '10 seconds', max_retries => 1,
                        max_payload_bytes => 8);
SELECT is((SELECT (queue, lease_timeout, timeout, max_retries)::text FROM jobs.job WHERE id = (SELECT id FROM old_job)),
          ('q_old', interval '15 seconds', interval '30 seconds', 3)::text,
          'define_type: a job submitted before the change keeps its queue, timeouts and max_retries');
CREATE TEMP TABLE new_job AS SELECT * FROM jobs.submit('dt_job', '{"n": 2}');
SELECT is((SELECT (queue, lease_timeout, timeout, max_retries)::text FROM jobs.job WHERE id = (SELECT id FROM new_job)),
          ('q_new', interval '5 seconds', interval '10 seconds', 1)::text,
          'define_type: a job submitted after the change gets the new queue, timeouts and max_retries');
SELECT is((SELECT l.lease_expires_at - now() FROM jobs.claim((SELECT id FROM old_job), 'w') AS l),
          interval '15 seconds', 'define_type: the old job is leased with its own lease_timeout (15 s)');
SELECT is((SELECT timeout_at - lease_expires_at FROM jobs.claim((SELECT id FROM new_job), 'w')),
          interval '5 seconds', 'define_type: the new job is leased with the new lease (5 s) and timeout (10 s)');
SELECT throws_ok($$ SELECT jobs.submit('dt_job', '{"n": 123}') $$, 'JB004', NULL,
                 'define_type: the new max_payload_bytes (8) applies to the next submit -> JB004');
SELECT is((SELECT count(*) FROM jobs.job WHERE kind = 'dt_job'), 2::bigint, 'define_type: the rejected submit inserted nothing');
SELECT is((SELECT count(*) FROM jobs.job_type WHERE kind LIKE 'dt\_%'), 4::bigint,
          'define_type: repeated upserts left exactly the four dt_ kinds (dt_a, dt_b, dt_c, dt_job)');

SELECT throws_ok($$ SELECT jobs.define_type('dt_bounds', timeout => '1000000 years') $$, '22023', NULL,
                 'define_type: timeout over 30 days -> 22023 (now() + timeout must never overflow)');
SELECT throws_ok($$ SELECT jobs.define_type('dt_bounds', lease_timeout => '31 days') $$, '22023', NULL,
                 'define_type: lease_timeout over 30 days -> 22023');
SELECT throws_ok($$ SELECT jobs.define_type('dt_bounds', backoff_base => '1 day', backoff_max => '1000 days') $$, '22023', NULL,
                 'define_type: backoff_max over 30 days -> 22023');
SELECT throws_ok($$ SELECT jobs.define_type('dt_bounds', slo_latency => '31 days') $$, '22023', NULL,
                 'define_type: slo_latency over 30 days -> 22023');
SELECT is((SELECT count(*) FROM jobs.job_type WHERE kind = 'dt_bounds'), 0::bigint,
          'define_type: rejected bounds declare nothing');

-- the success objective and the alert bounds (docs/observability.md).
SELECT is((SELECT (slo_success, max_backlog, run_time_budget, max_failure_rate)::text FROM jobs.define_type('dt_obj')),
          '(0.99,10000,,0.05)', 'define_type: slo_success 0.99, max_backlog 10000, run_time_budget NULL (half the timeout), max_failure_rate 0.05 by default');
SELECT is((SELECT (slo_success, max_backlog, run_time_budget, max_failure_rate)::text
             FROM jobs.define_type('dt_obj', slo_success => 0.999, max_backlog => 5, run_time_budget => '2 seconds', max_failure_rate => 0)),
          '(0.999,5,00:00:02,0)', 'define_type: the objectives and bounds are stored as given');
SELECT is((SELECT (slo_success, max_backlog, run_time_budget)::text FROM jobs.define_type('dt_obj')),
          '(0.99,10000,)', 'define_type: omitted arguments take the defaults again (an upsert replaces the definition)');
SELECT throws_ok($$ SELECT jobs.define_type('dt_obj', slo_success => 0) $$, '22023', NULL, 'define_type: slo_success 0 -> 22023');
SELECT throws_ok($$ SELECT jobs.define_type('dt_obj', slo_success => 1) $$, '22023', NULL, 'define_type: slo_success 1 -> 22023');
SELECT throws_ok($$ SELECT jobs.define_type('dt_obj', slo_success => NULL) $$, '22023', NULL, 'define_type: slo_success NULL -> 22023');
SELECT throws_ok($$ SELECT jobs.define_type('dt_obj', max_backlog => 0) $$, '22023', NULL, 'define_type: max_backlog 0 -> 22023');
SELECT throws_ok($$ SELECT jobs.define_type('dt_obj', run_time_budget => '0 seconds') $$, '22023', NULL, 'define_type: run_time_budget 0 -> 22023');
SELECT throws_ok($$ SELECT jobs.define_type('dt_obj', max_failure_rate => 1.01) $$, '22023', NULL, 'define_type: max_failure_rate above 1 -> 22023');
SELECT is((SELECT max_backlog FROM jobs.job_type WHERE kind = 'dt_obj'), 10000::bigint, 'define_type: a refused call changed nothing');

SELECT * FROM finish();
ROLLBACK;
