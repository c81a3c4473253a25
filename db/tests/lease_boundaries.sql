-- pgTAP for the edges of a lease, where a fence can be off without any fresh lease showing it.
-- A heartbeat that does not hold a lease must write nothing: on a fresh lease an extension
-- by mistake changes nothing visible (the lease already runs lease_timeout from now), so these
-- use an expired one, where held = false with the extension kept would take the job away from
-- the reaper. Each refusal is by one fact only: another worker name, a stale lease_version (a
-- zombie), another session role, a wrong lease token, a finished job. Then the instants: a
-- lease expiring exactly at now() is reaped (now() is the transaction's, fixed here), one a
-- microsecond later is not; a lease that reached exactly its cap is a timeout; a heartbeat at
-- exactly the execution timeout is told the job is no longer alive.
-- The concurrent sides of the same fences: db/tests/isolation (docs/testing.md).
BEGIN;
SELECT plan(25);
\ir helpers/lease_helpers.psql

-- Two login roles of the worker kind (rolled back with the test).
CREATE ROLE lbd_worker_a LOGIN;
CREATE ROLE lbd_worker_b LOGIN;
GRANT jobs_worker TO lbd_worker_a, lbd_worker_b;
GRANT ALL ON ids, snap TO PUBLIC;

DO $$ BEGIN
    PERFORM jobs.define_type('lbd.t', lease_timeout => '15 seconds', timeout => '30 seconds');
    PERFORM pg_temp.job(n, 'lbd.t') FROM unnest(ARRAY['x', 'zombie', 'done', 'mine', 'now', 'later', 'cap', 'alive']) AS n;
END $$;
SELECT results_eq($$ SELECT session_role_bound, lease_token_required FROM jobs.configure_leases() $$,
                  $$ VALUES (true, false) $$, 'lease_policy: bound to the session role, tokens not required (the defaults)');

-- x, zombie and mine: claimed by worker A as host-a, 16 s without a heartbeat, reaped, claimed
-- again by A under the same name (lease_version 3) and left another 16 s: expired, not reaped
-- yet, and their lease_version 1 is a zombie's. done: completed by A.
SET SESSION AUTHORIZATION lbd_worker_a;
SELECT is((SELECT count(*) FROM jobs.claim_many(ARRAY[pg_temp.id('x'), pg_temp.id('zombie'), pg_temp.id('done'), pg_temp.id('mine')], 'host-a')),
          4::bigint, 'setup: worker A claims four jobs');
SELECT is((jobs.complete(pg_temp.id('done'), 'host-a', 1)).accepted, true, 'setup: A completes one');
RESET SESSION AUTHORIZATION;
DO $$ BEGIN
    PERFORM pg_temp.elapse(pg_temp.id(n), '16 seconds') FROM unnest(ARRAY['x', 'zombie', 'mine']) AS n;
END $$;
SELECT results_eq($$ SELECT job_id FROM jobs.reap() ORDER BY job_id $$,
                  $$ SELECT pg_temp.id(n) FROM unnest(ARRAY['x', 'zombie', 'mine']) AS n ORDER BY 1 $$,
                  'setup: the three expired leases are reaped');
SET SESSION AUTHORIZATION lbd_worker_a;
SELECT is((SELECT count(*) FROM jobs.claim_many(ARRAY[pg_temp.id('x'), pg_temp.id('zombie'), pg_temp.id('mine')], 'host-a')),
          3::bigint, 'setup: A claims them again (lease_version 3)');
RESET SESSION AUTHORIZATION;
DO $$ BEGIN
    PERFORM pg_temp.elapse(pg_temp.id(n), '16 seconds') FROM unnest(ARRAY['x', 'zombie', 'mine']) AS n;
    PERFORM pg_temp.snap(pg_temp.id(n)) FROM unnest(ARRAY['x', 'zombie', 'done']) AS n;
END $$;

SET SESSION AUTHORIZATION lbd_worker_a;
SELECT is((SELECT held FROM jobs.heartbeat_many(ARRAY[pg_temp.id('x')], 'host-other', ARRAY[3::bigint])), false,
          'expired lease, another worker name: held = false');
SELECT is((SELECT held FROM jobs.heartbeat_many(ARRAY[pg_temp.id('zombie')], 'host-a', ARRAY[1::bigint])), false,
          'expired lease, a zombie''s lease_version (same worker name, an earlier lease): held = false');
SELECT is((SELECT held FROM jobs.heartbeat_many(ARRAY[pg_temp.id('x')], 'host-a', ARRAY[3::bigint], ARRAY[gen_random_uuid()])), false,
          'expired lease, a wrong lease token: held = false');
SELECT is((SELECT held FROM jobs.heartbeat_many(ARRAY[pg_temp.id('done')], 'host-a', ARRAY[1::bigint])), false,
          'a completed job, its worker and lease_version: held = false');
SET SESSION AUTHORIZATION lbd_worker_b;
SELECT is((SELECT held FROM jobs.heartbeat_many(ARRAY[pg_temp.id('x')], 'host-a', ARRAY[3::bigint])), false,
          'expired lease, another session role with the worker name and lease_version: held = false');
RESET SESSION AUTHORIZATION;
SELECT is(pg_temp.state(pg_temp.id('x')), pg_temp.snapped(pg_temp.id('x')),
          'refused heartbeats (another name, a wrong token, another role) wrote nothing: the lease is still expired');
SELECT is(pg_temp.state(pg_temp.id('zombie')), pg_temp.snapped(pg_temp.id('zombie')),
          'the zombie''s refused heartbeat wrote nothing: the new lease is still expired');
SELECT is(pg_temp.state(pg_temp.id('done')), pg_temp.snapped(pg_temp.id('done')),
          'the heartbeat on a completed job wrote nothing (no lease on a finished job)');

-- The holder's own heartbeat: an expired lease nobody reaped is still its. Claimed 16 s ago,
-- it grows up to its cap, claimed_at + timeout, 14 s from now.
SET SESSION AUTHORIZATION lbd_worker_a;
SELECT results_eq($$ SELECT held, alive, lease_expires_at FROM jobs.heartbeat_many(ARRAY[pg_temp.id('mine')], 'host-a', ARRAY[3::bigint]) $$,
                  $$ VALUES (true, true, now() + interval '14 seconds') $$,
                  'expired lease, its holder: held, and extended (up to its cap)');
RESET SESSION AUTHORIZATION;
SELECT results_eq($$ SELECT job_id FROM jobs.reap() ORDER BY job_id $$,
                  $$ SELECT pg_temp.id(n) FROM unnest(ARRAY['x', 'zombie']) AS n ORDER BY 1 $$,
                  'reap: takes both leases the refused heartbeats left expired, not the one its holder renewed');
SELECT results_eq($$ SELECT status, lease_version FROM jobs.job WHERE id IN (pg_temp.id('x'), pg_temp.id('zombie')) ORDER BY id $$,
                  $$ VALUES ('queued'::jobs.status, 4::bigint), ('queued'::jobs.status, 4::bigint) $$,
                  'reap: both requeued under a new lease_version');
SELECT is((SELECT status FROM jobs.job WHERE id = pg_temp.id('mine')), 'processing'::jobs.status, 'reap: the renewed lease is left alone');

-- The instant of expiry: a lease ends at lease_expires_at, so one that expires exactly now is
-- reaped and one a microsecond later is not (both far from their execution timeout).
SELECT is((SELECT count(*) FROM jobs.claim_many(ARRAY[pg_temp.id('now'), pg_temp.id('later'), pg_temp.id('cap')], 'host-r')), 3::bigint,
          'setup: three more leases');
DO $$ BEGIN
    UPDATE jobs.job SET claimed_at = now() - interval '15 seconds', lease_expires_at = now() WHERE id = pg_temp.id('now');
    UPDATE jobs.job SET claimed_at = now() - interval '15 seconds', lease_expires_at = now() + interval '1 microsecond'
     WHERE id = pg_temp.id('later');
    -- A lease heartbeats ran up to its cap, claimed_at + timeout, which is now.
    UPDATE jobs.job SET claimed_at = now() - interval '30 seconds', lease_expires_at = now() WHERE id = pg_temp.id('cap');
END $$;
SELECT results_eq($$ SELECT job_id FROM jobs.reap() ORDER BY job_id $$,
                  $$ SELECT pg_temp.id(n) FROM unnest(ARRAY['now', 'cap']) AS n ORDER BY 1 $$,
                  'reap: a lease expiring exactly now() is reaped; one expiring a microsecond later is not');
SELECT is(pg_temp.last_event(pg_temp.id('now')), '(processing,queued,2,host-r,reaped,"lease expired")',
          'reap: the lease that expired now lost its heartbeats: reaped, due at once');
SELECT is(pg_temp.last_event(pg_temp.id('cap')), '(processing,queued,2,host-r,timed_out,"timeout after 00:00:30")',
          'reap: a lease that reached exactly claimed_at + timeout is a timeout');
SELECT is((SELECT status FROM jobs.job WHERE id = pg_temp.id('later')), 'processing'::jobs.status,
          'reap: the lease a microsecond from expiry is left alone');

-- The instant of the execution timeout: at claimed_at + timeout the job is no longer alive.
SELECT is((SELECT count(*) FROM jobs.claim_many(ARRAY[pg_temp.id('alive')], 'host-r')), 1::bigint, 'setup: one more lease');
DO $$ BEGIN
    UPDATE jobs.job SET claimed_at = now() - interval '30 seconds', lease_expires_at = now() + interval '1 second'
     WHERE id = pg_temp.id('alive');
END $$;
SELECT results_eq($$ SELECT held, alive FROM jobs.heartbeat_many(ARRAY[pg_temp.id('alive')], 'host-r', ARRAY[1::bigint]) $$,
                  $$ VALUES (true, false) $$,
                  'heartbeat at exactly claimed_at + timeout: held, but no longer alive (the worker should stop)');
SELECT ok((SELECT lease_expires_at = now() + interval '1 second' FROM jobs.job WHERE id = pg_temp.id('alive')),
          'heartbeat at the cap: the lease neither grows past the cap nor shrinks');

SELECT * FROM finish();
ROLLBACK;
