-- The Redis namespace (jobs.redis_settings): random at deploy, read by every role, changed by
-- admins only, refused when it could not prefix a key (docs/sql-api.md, "redis_namespace").
BEGIN;
SELECT plan(9);

SELECT matches(jobs.redis_namespace(), '^jobfence-[0-9a-f]{10}$', 'redis_namespace: random at deploy, jobfence-<10 hex>');
SELECT is((SELECT count(*) FROM jobs.redis_settings), 1::bigint, 'redis_settings: one row');
SET LOCAL ROLE jobs_producer;
SELECT matches(jobs.redis_namespace(), '^jobfence-[0-9a-f]{10}$', 'redis_namespace: a producer reads it');
SELECT throws_ok($$ SELECT * FROM jobs.configure_redis('mine') $$, '42501', NULL, 'configure_redis: a producer may not change it');
RESET ROLE;
SET LOCAL ROLE jobs_worker;
SELECT lives_ok($$ SELECT jobs.redis_namespace() $$, 'redis_namespace: a worker reads it');
RESET ROLE;
SET LOCAL ROLE jobs_admin;
SELECT is((SELECT redis_namespace FROM jobs.configure_redis('billing-prod')), 'billing-prod', 'configure_redis: an admin sets it');
SELECT is(jobs.redis_namespace(), 'billing-prod', 'redis_namespace: ... and every reader sees it');
SELECT throws_ok($$ SELECT * FROM jobs.configure_redis('a{b}') $$, '22023', NULL,
                 'configure_redis: braces (the hash tag follows) -> 22023');
SELECT is((SELECT redis_namespace FROM jobs.configure_redis()), 'billing-prod', 'configure_redis: no arguments reads it, unchanged');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
