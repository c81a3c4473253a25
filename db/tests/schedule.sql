-- Periodic jobs: jobs.schedule validates (22023, JB004, JB005, nothing changed) and keeps a
-- schedule's position across an unchanged redefinition; jobs.enqueue_tick enqueues each tick
-- exactly once through the submit path; ticked_through and next_tick only move forward;
-- jobs.skip_ticks, jobs.unschedule, jobs.schedules and the grants (docs/sql-api.md, "schedule").
BEGIN;
SELECT plan(86);

SELECT jobs.define_type('sc_t');
SELECT jobs.define_type('sc_small', max_payload_bytes => 40);
CREATE TEMP TABLE snap (label text, s jobs.schedule);
CREATE FUNCTION pg_temp.row_of(n text) RETURNS jobs.schedule LANGUAGE sql AS $$
    SELECT s FROM jobs.schedule AS s WHERE s.name = n $$;

-- creation and defaults.
SELECT is((SELECT (s.name, s.cron, s.kind, s.payload, s.timezone, s.missed, s.enabled)::text
             FROM jobs.schedule('sc_a', '*/5  *  * * *', 'sc_t') AS s),
          ('sc_a', '*/5 * * * *', 'sc_t', '{}'::jsonb, 'UTC', 'once', true)::text,
          'schedule: defaults are payload {}, UTC, missed once, enabled; the cron text is stored with single spaces');
SELECT is((SELECT (ticked_through = now(), last_tick IS NULL, last_job_id IS NULL, next_tick IS NULL)::text
             FROM jobs.schedule AS s WHERE s.name = 'sc_a'),
          '(t,t,t,t)', 'schedule: a new schedule starts at now(): no tick before its creation is due');
SELECT is((jobs.schedule('sc_b', '0 3 * * MON', 'sc_t', '{"report": "weekly"}', 'Europe/Paris', 'skip')).timezone,
          'Europe/Paris', 'schedule: a day-of-week name, a time zone and the skip policy are accepted');
SELECT lives_ok($$ SELECT jobs.schedule('sc_c', '*/10 * * * * *', 'sc_t') $$, 'schedule: 6 fields (seconds first) are accepted');
SELECT lives_ok($$ SELECT jobs.schedule('sc_d', '0 0 L * *', 'sc_t') $$, 'schedule: L (last day of the month) is accepted');
SELECT lives_ok($$ SELECT jobs.schedule('sc_e', '0 12 * JAN-MAR 5#2', 'sc_t') $$, 'schedule: month names and nth weekday are accepted');
SELECT lives_ok($$ SELECT jobs.schedule('sc_f', '1-5/2,7 0-23/6 1,15 * 0-7', 'sc_t') $$, 'schedule: ranges, steps and lists at the bounds are accepted');
SELECT is((SELECT array_agg(name ORDER BY name) FROM jobs.schedules()),
          ARRAY['sc_a', 'sc_b', 'sc_c', 'sc_d', 'sc_e', 'sc_f'], 'schedules: every schedule, by name');

-- validation -> 22023 / JB004 / JB005, nothing changed.
CREATE TEMP TABLE before_schedules AS SELECT * FROM jobs.schedule;
SELECT throws_ok($$ SELECT jobs.schedule(NULL, '* * * * *', 'sc_t') $$, '22023', NULL, 'schedule: NULL name -> 22023');
SELECT throws_ok($$ SELECT jobs.schedule('has space', '* * * * *', 'sc_t') $$, '22023', NULL, 'schedule: malformed name -> 22023');
SELECT throws_ok($$ SELECT jobs.schedule('a' || repeat('b', 128), '* * * * *', 'sc_t') $$, '22023', NULL, 'schedule: 129-character name -> 22023');
SELECT throws_ok($$ SELECT jobs.schedule('sc_x', NULL, 'sc_t') $$, '22023', NULL, 'schedule: NULL cron -> 22023');
SELECT throws_ok($$ SELECT jobs.schedule('sc_x', '   ', 'sc_t') $$, '22023', NULL, 'schedule: blank cron -> 22023');
SELECT throws_ok($$ SELECT jobs.schedule('sc_x', '* * * *', 'sc_t') $$, '22023',
                 'jobs.schedule: cron ''* * * *'' has 4 fields, expected 5 (minute hour day-of-month month day-of-week) or 6 (seconds first)',
                 'schedule: 4 fields -> 22023 naming the count');
SELECT throws_ok($$ SELECT jobs.schedule('sc_x', '* * * * * * *', 'sc_t') $$, '22023', NULL, 'schedule: 7 fields -> 22023');
SELECT throws_ok($$ SELECT jobs.schedule('sc_x', '60 * * * *', 'sc_t') $$, '22023',
                 'jobs.schedule: cron field 1 (minute) ''60'': 60 is outside 0-59', 'schedule: minute 60 -> 22023 naming the field');
SELECT throws_ok($$ SELECT jobs.schedule('sc_x', '0 24 * * *', 'sc_t') $$, '22023', NULL, 'schedule: hour 24 -> 22023');
SELECT throws_ok($$ SELECT jobs.schedule('sc_x', '0 0 0 * *', 'sc_t') $$, '22023', NULL, 'schedule: day of month 0 -> 22023');
SELECT throws_ok($$ SELECT jobs.schedule('sc_x', '0 0 1 13 *', 'sc_t') $$, '22023', NULL, 'schedule: month 13 -> 22023');
SELECT throws_ok($$ SELECT jobs.schedule('sc_x', '0 0 * * 8', 'sc_t') $$, '22023', NULL, 'schedule: day of week 8 -> 22023');
SELECT throws_ok($$ SELECT jobs.schedule('sc_x', '1-60 * * * *', 'sc_t') $$, '22023', NULL, 'schedule: a range ending out of bounds -> 22023');
SELECT throws_ok($$ SELECT jobs.schedule('sc_x', '60 * * * * *', 'sc_t') $$, '22023', NULL, 'schedule: second 60 (6 fields) -> 22023');
SELECT throws_ok($$ SELECT jobs.schedule('sc_x', '*/0 * * * *', 'sc_t') $$, '22023',
                 'jobs.schedule: cron field 1 (minute) ''*/0'': a step must be a number from 1 to 60', 'schedule: step 0 -> 22023');
SELECT throws_ok($$ SELECT jobs.schedule('sc_x', '*/ * * * *', 'sc_t') $$, '22023', NULL, 'schedule: empty step -> 22023');
SELECT throws_ok($$ SELECT jobs.schedule('sc_x', '5% * * * *', 'sc_t') $$, '22023', NULL, 'schedule: a stray character -> 22023');
SELECT throws_ok($$ SELECT jobs.schedule('sc_x', 'MON * * * *', 'sc_t') $$, '22023', NULL, 'schedule: a name in the minute field -> 22023');
SELECT throws_ok($$ SELECT jobs.schedule('sc_x', '99999999999999999999 * * * *', 'sc_t') $$, '22023', NULL, 'schedule: a huge number -> 22023, not an overflow');
SELECT throws_ok($$ SELECT jobs.schedule('sc_x', repeat('1,', 100) || '1 * * * *', 'sc_t') $$, '22023', NULL, 'schedule: a cron text over 200 bytes -> 22023');
SELECT throws_ok($$ SELECT jobs.schedule('sc_x', '* * * * *', 'sc_t', missed => 'later') $$, '22023', NULL, 'schedule: unknown missed policy -> 22023');
SELECT throws_ok($$ SELECT jobs.schedule('sc_x', '* * * * *', 'sc_t', missed => NULL) $$, '22023', NULL, 'schedule: NULL missed policy -> 22023');
SELECT throws_ok($$ SELECT jobs.schedule('sc_x', '* * * * *', 'sc_t', timezone => 'Mars/Olympus') $$, '22023', NULL, 'schedule: unknown time zone -> 22023');
SELECT throws_ok($$ SELECT jobs.schedule('sc_x', '* * * * *', 'sc_t', timezone => NULL) $$, '22023', NULL, 'schedule: NULL time zone -> 22023');
SELECT throws_ok($$ SELECT jobs.schedule('sc_x', '* * * * *', 'sc_t', '[]') $$, '22023', NULL, 'schedule: an array payload -> 22023');
SELECT throws_ok($$ SELECT jobs.schedule('sc_x', '* * * * *', 'sc_t', 'null') $$, '22023', NULL, 'schedule: a JSON null payload -> 22023');
SELECT throws_ok($$ SELECT jobs.schedule('sc_x', '* * * * *', 'no_such_kind') $$, 'JB005', NULL, 'schedule: unknown kind -> JB005');
SELECT throws_ok($$ SELECT jobs.schedule('sc_x', '* * * * *', 'bad kind') $$, '22023', NULL, 'schedule: malformed kind -> 22023');
SELECT throws_ok($$ SELECT jobs.schedule('sc_x', '* * * * *', 'sc_small', jsonb_build_object('blob', repeat('x', 100))) $$,
                 'JB004', NULL, 'schedule: payload over the kind''s limit -> JB004');
SELECT throws_ok($$ SELECT jobs.schedule('sc_x', '* * * * *', 'sc_t', (repeat('[', 70) || repeat(']', 70))::jsonb) $$,
                 '22023', NULL, 'schedule: a nested array is not an object -> 22023');
SELECT throws_ok($$ SELECT jobs.schedule('sc_x', '* * * * *', 'sc_t', ('{"a":' || repeat('[', 70) || repeat(']', 70) || '}')::jsonb) $$,
                 'JB004', NULL, 'schedule: payload nested deeper than 64 levels -> JB004');
SELECT throws_ok($$ SELECT jobs.schedule('sc_x', '* * * * *', 'sc_t', '{"n": 1e400}') $$,
                 '22003', NULL, 'schedule: a payload number beyond the IEEE-754 double range -> 22003');
SELECT throws_ok($$ SELECT jobs.schedule('sc_a', '61 * * * *', 'sc_t') $$, '22023', NULL, 'schedule: a bad redefinition -> 22023');
SELECT set_eq($$ SELECT s::text FROM jobs.schedule AS s $$, $$ SELECT b::text FROM before_schedules AS b $$,
              'schedule: refused calls changed nothing');

-- redefinition keeps the position unless the timetable changes or the schedule is enabled again.
UPDATE jobs.schedule SET ticked_through = now() - interval '1 hour' WHERE name = 'sc_a';
SELECT is((jobs.schedule('sc_a', '*/5 * * * *', 'sc_t')).ticked_through, now() - interval '1 hour',
          'schedule: an unchanged definition keeps ticked_through (a worker restart loses no tick)');
SELECT is((jobs.schedule('sc_a', '*/5 * * * *', 'sc_t', '{"v": 2}', missed => 'skip')).ticked_through, now() - interval '1 hour',
          'schedule: a new payload or missed policy keeps ticked_through');
SELECT is((SELECT (payload, missed)::text FROM jobs.schedule WHERE name = 'sc_a'), ('{"v": 2}'::jsonb, 'skip')::text,
          'schedule: the redefinition is stored');
SELECT is((jobs.schedule('sc_a', '*/5 * * * *', 'sc_t', '{"v": 2}', missed => 'skip', enabled => false)).enabled, false,
          'schedule: enabled => false disables');
SELECT is((jobs.schedule('sc_a', '*/5 * * * *', 'sc_t', '{"v": 2}', missed => 'skip')).enabled, false,
          'schedule: enabled NULL keeps a disabled schedule disabled');
SELECT is((jobs.schedule('sc_a', '*/5 * * * *', 'sc_t', '{"v": 2}', missed => 'skip', enabled => true)).ticked_through, now(),
          'schedule: enabling again starts from now(): ticks while disabled are not missed ones');
UPDATE jobs.schedule SET ticked_through = now() - interval '1 hour', next_tick = now() + interval '1 minute' WHERE name = 'sc_a';
SELECT is((SELECT (s.ticked_through, s.next_tick IS NULL)::text FROM jobs.schedule('sc_a', '*/7 * * * *', 'sc_t') AS s),
          (now(), true)::text, 'schedule: a new cron text starts from now() and forgets the next tick');

-- enqueue_tick: one job per tick, through the submit path.
UPDATE jobs.schedule SET ticked_through = '2026-01-01T00:00:00Z', payload = '{"n": 1}' WHERE name = 'sc_c';
CREATE TEMP TABLE t1 AS SELECT * FROM jobs.enqueue_tick('sc_c', '2026-01-01T00:00:10Z', '2026-01-01T00:00:20Z');
SELECT is((SELECT (created, signal, queue, run_after = now())::text FROM t1), '(t,t,default,t)',
          'enqueue_tick: a due tick creates a job to signal, due now, on the kind''s queue');
SELECT is((SELECT (kind, payload, status, idempotency_key)::text FROM jobs.job WHERE id = (SELECT job_id FROM t1)),
          ('sc_t', '{"n": 1}'::jsonb, 'queued', 'schedule:sc_c:2026-01-01T00:00:10Z')::text,
          'enqueue_tick: the job has the schedule''s kind and payload and the key schedule:<name>:<tick in UTC>');
SELECT is((SELECT array_agg(reason) FROM jobs.history WHERE job_id = (SELECT job_id FROM t1)), ARRAY['submitted'],
          'enqueue_tick: the job''s history starts with its submitted event');
SELECT is((SELECT (ticked_through, last_tick, last_job_id, next_tick)::text FROM jobs.schedule WHERE name = 'sc_c'),
          ('2026-01-01T00:00:10Z'::timestamptz, '2026-01-01T00:00:10Z'::timestamptz, (SELECT job_id FROM t1),
           '2026-01-01T00:00:20Z'::timestamptz)::text,
          'enqueue_tick: records ticked_through, last_tick, last_job_id and next_tick');
SELECT is((SELECT (job_id, created, signal)::text FROM jobs.enqueue_tick('sc_c', '2026-01-01T00:00:10Z', '2026-01-01T00:00:20Z')),
          ((SELECT job_id FROM t1), false, false)::text,
          'enqueue_tick: the same tick again answers the same job, created false, nothing to signal');
SELECT is((SELECT (job_id IS NULL, created)::text FROM jobs.enqueue_tick('sc_c', '2026-01-01T00:00:05Z')),
          '(t,f)', 'enqueue_tick: an earlier tick than ticked_through was handled (skipped): no job');
SELECT is((SELECT count(*) FROM jobs.job WHERE kind = 'sc_t'), 1::bigint, 'enqueue_tick: still one job');
SELECT is((SELECT ticked_through FROM jobs.schedule WHERE name = 'sc_c'), '2026-01-01T00:00:10Z'::timestamptz,
          'enqueue_tick: ticked_through never moves back');
CREATE TEMP TABLE t2 AS SELECT * FROM jobs.enqueue_tick('sc_c', '2026-01-01T00:00:30Z', '2026-01-01T00:00:40Z');
SELECT is((SELECT (created, (SELECT job_id FROM t2) <> (SELECT job_id FROM t1))::text FROM t2), '(t,t)',
          'enqueue_tick: the next tick is a new job');
SELECT is((SELECT (last_tick, last_job_id, next_tick)::text FROM jobs.schedule WHERE name = 'sc_c'),
          ('2026-01-01T00:00:30Z'::timestamptz, (SELECT job_id FROM t2), '2026-01-01T00:00:40Z'::timestamptz)::text,
          'enqueue_tick: last_tick, last_job_id and next_tick move to the new tick');
SELECT jobs.enqueue_tick('sc_c', '2026-01-01T00:00:35Z', '2026-01-01T00:00:36Z');
SELECT is((SELECT next_tick FROM jobs.schedule WHERE name = 'sc_c'), '2026-01-01T00:00:40Z'::timestamptz,
          'enqueue_tick: next_tick never moves back');
SELECT jobs.enqueue_tick('sc_c', '2026-01-01T00:00:50Z');
SELECT is((SELECT next_tick FROM jobs.schedule WHERE name = 'sc_c'), NULL::timestamptz,
          'enqueue_tick: a next_tick that is now behind is cleared, not kept in the past');

-- enqueue_tick refusals change nothing.
UPDATE jobs.schedule SET kind = 'sc_small', payload = jsonb_build_object('blob', repeat('x', 100)),
                         ticked_through = now() - interval '1 hour' WHERE name = 'sc_d';
CREATE TEMP TABLE before_tick AS SELECT * FROM jobs.schedule;
SELECT throws_ok($$ SELECT * FROM jobs.enqueue_tick('sc_c', now() + interval '1 second') $$, '22023', NULL,
                 'enqueue_tick: a tick after now() -> 22023 (it would run early)');
SELECT throws_ok($$ SELECT * FROM jobs.enqueue_tick('sc_c', NULL) $$, '22023', NULL, 'enqueue_tick: NULL tick -> 22023');
SELECT throws_ok($$ SELECT * FROM jobs.enqueue_tick('sc_c', '-infinity') $$, '22023', NULL, 'enqueue_tick: an infinite tick -> 22023');
SELECT throws_ok($$ SELECT * FROM jobs.enqueue_tick(NULL, now()) $$, '22023', NULL, 'enqueue_tick: NULL name -> 22023');
SELECT throws_ok($$ SELECT * FROM jobs.enqueue_tick('sc_c', now(), now()) $$, '22023', NULL, 'enqueue_tick: next_tick not after tick -> 22023');
SELECT throws_ok($$ SELECT * FROM jobs.enqueue_tick('sc_d', now()) $$, 'JB004', NULL,
                 'enqueue_tick: a payload over the kind''s limit (lowered since) -> JB004, as a submit');
SELECT set_eq($$ SELECT s::text FROM jobs.schedule AS s $$, $$ SELECT b::text FROM before_tick AS b $$,
              'enqueue_tick: refused calls changed nothing');
SELECT is_empty($$ SELECT * FROM jobs.enqueue_tick('sc_nope', now()) $$, 'enqueue_tick: unknown schedule -> zero rows');

-- skip_ticks: handled without a job; both instants only move forward.
UPDATE jobs.schedule SET ticked_through = now() - interval '2 hours', next_tick = NULL WHERE name = 'sc_b';
SELECT is((SELECT (s.ticked_through, s.next_tick)::text FROM jobs.skip_ticks('sc_b', now() - interval '1 hour', now() + interval '1 hour') AS s),
          (now() - interval '1 hour', now() + interval '1 hour')::text, 'skip_ticks: moves ticked_through and records next_tick');
SELECT is((SELECT (s.ticked_through, s.next_tick)::text FROM jobs.skip_ticks('sc_b', now() - interval '90 minutes', now() + interval '30 minutes') AS s),
          (now() - interval '1 hour', now() + interval '1 hour')::text, 'skip_ticks: an older call moves neither back');
SELECT is((SELECT count(*) FROM jobs.job WHERE idempotency_key LIKE 'schedule:sc_b:%'), 0::bigint, 'skip_ticks: enqueues nothing');
SELECT throws_ok($$ SELECT * FROM jobs.skip_ticks('sc_b', now() + interval '1 second') $$, '22023', NULL, 'skip_ticks: through after now() -> 22023');
SELECT throws_ok($$ SELECT * FROM jobs.skip_ticks('sc_b', now(), now()) $$, '22023', NULL, 'skip_ticks: next_tick not after through -> 22023');
SELECT throws_ok($$ SELECT * FROM jobs.skip_ticks(NULL, now()) $$, '22023', NULL, 'skip_ticks: NULL name -> 22023');
SELECT is_empty($$ SELECT * FROM jobs.skip_ticks('sc_nope', now()) $$, 'skip_ticks: unknown schedule -> zero rows');

-- unschedule; the jobs stay, and a schedule of the same name cannot enqueue a tick twice.
SELECT is(jobs.unschedule('sc_c'), true, 'unschedule: true for an existing schedule');
SELECT is(jobs.unschedule('sc_c'), false, 'unschedule: false once it is gone');
SELECT throws_ok($$ SELECT jobs.unschedule(NULL) $$, '22023', NULL, 'unschedule: NULL name -> 22023');
SELECT is((SELECT count(*) FROM jobs.job WHERE idempotency_key LIKE 'schedule:sc_c:%'), 4::bigint, 'unschedule: its jobs stay');
SELECT jobs.schedule('sc_c', '*/10 * * * * *', 'sc_t');
UPDATE jobs.schedule SET ticked_through = '2026-01-01T00:00:00Z' WHERE name = 'sc_c';
SELECT is((SELECT (job_id, created, signal)::text FROM jobs.enqueue_tick('sc_c', '2026-01-01T00:00:10Z')),
          ((SELECT job_id FROM t1), false, false)::text,
          'enqueue_tick: after unschedule and schedule again, a tick already enqueued answers its job (the idempotency key)');

-- roles.
SELECT ok(has_function_privilege('jobs_producer', 'jobs.schedules()', 'EXECUTE'), 'roles: jobs_producer lists schedules');
SELECT ok(NOT has_function_privilege('jobs_producer', 'jobs.schedule(text,text,text,jsonb,text,text,boolean)', 'EXECUTE')
          AND NOT has_function_privilege('jobs_producer', 'jobs.unschedule(text)', 'EXECUTE')
          AND NOT has_function_privilege('jobs_producer', 'jobs.enqueue_tick(text,timestamptz,timestamptz)', 'EXECUTE')
          AND NOT has_function_privilege('jobs_producer', 'jobs.skip_ticks(text,timestamptz,timestamptz)', 'EXECUTE'),
          'roles: jobs_producer cannot schedule, unschedule or tick');
SELECT ok(NOT has_function_privilege('jobs_worker', 'jobs.schedules()', 'EXECUTE')
          AND NOT has_function_privilege('jobs_worker', 'jobs.schedule(text,text,text,jsonb,text,text,boolean)', 'EXECUTE')
          AND NOT has_function_privilege('jobs_worker', 'jobs.enqueue_tick(text,timestamptz,timestamptz)', 'EXECUTE'),
          'roles: jobs_worker has no schedule function');
SELECT ok(has_function_privilege('jobs_admin', 'jobs.schedule(text,text,text,jsonb,text,text,boolean)', 'EXECUTE')
          AND has_function_privilege('jobs_admin', 'jobs.unschedule(text)', 'EXECUTE')
          AND has_function_privilege('jobs_admin', 'jobs.schedules()', 'EXECUTE')
          AND has_function_privilege('jobs_admin', 'jobs.enqueue_tick(text,timestamptz,timestamptz)', 'EXECUTE')
          AND has_function_privilege('jobs_admin', 'jobs.skip_ticks(text,timestamptz,timestamptz)', 'EXECUTE'),
          'roles: jobs_admin has every schedule function');
SELECT ok(NOT has_table_privilege('jobs_admin', 'jobs.schedule', 'SELECT'), 'roles: the table jobs.schedule is private');

SELECT * FROM finish();
ROLLBACK;
