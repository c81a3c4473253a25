-- The roles of a jobfence deployment, for a superuser (the DBA) to run once per cluster and
-- database, before the schema owner deploys (docs/security.md, docs/operations.md "Deploy"):
--
--   psql -X -v ON_ERROR_STOP=1 -v db=jobfence [-v password_jobs_owner=...] -f scripts/roles.sql postgres
--
-- Idempotent: what exists is left as it is (a password given again is set again).
--   jobs_owner         LOGIN, owns database :db and everything sqitch deploys; no process uses it
--   jobs_producer, jobs_worker, jobs_admin   NOLOGIN groups the deployed functions are granted to
--   jobfence_worker    LOGIN, jobs_worker   (jobfence worker)
--   jobfence_reaper    LOGIN, jobs_admin    (jobfence reaper: reap, recover, prune, compact)
--   jobfence_relay     LOGIN, jobs_admin    (jobfence relay: stale_queued is granted to jobs_admin only)
--   jobfence_api       LOGIN, jobs_producer (jobfence api: producer-scoped requests)
--   jobfence_api_admin LOGIN, jobs_admin    (jobfence api: admin-scoped requests, --no-auth, the
--                                            dashboard and GET /queues; JOBFENCE_API_ADMIN_DATABASE_URL)
--   jobfence_admin     LOGIN, jobs_admin    (operators: jobfence stats, replay, audit, demo)
-- Passwords: -v password_<role>=SECRET for any of the LOGIN roles; none given, none set
-- (a server with trust or peer authentication, as on a laptop).
\set ON_ERROR_STOP on

SELECT format('CREATE ROLE %I NOLOGIN', r)
  FROM unnest(ARRAY['jobs_producer', 'jobs_worker', 'jobs_admin']) AS r
 WHERE NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = r)
\gexec

SELECT format('CREATE ROLE %I LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE', r)
  FROM unnest(ARRAY['jobs_owner', 'jobfence_worker', 'jobfence_reaper', 'jobfence_relay',
                    'jobfence_api', 'jobfence_api_admin', 'jobfence_admin']) AS r
 WHERE NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = r)
\gexec

SELECT format('GRANT %I TO %I', g, l)
  FROM (VALUES ('jobs_worker', 'jobfence_worker'), ('jobs_admin', 'jobfence_reaper'),
               ('jobs_admin', 'jobfence_relay'), ('jobs_producer', 'jobfence_api'),
               ('jobs_admin', 'jobfence_api_admin'),
               ('jobs_admin', 'jobfence_admin')) AS v(g, l)
 WHERE NOT EXISTS (SELECT 1 FROM pg_catalog.pg_auth_members AS m
                    WHERE m.roleid = g::regrole AND m.member = l::regrole)
\gexec

\if :{?password_jobs_owner}
ALTER ROLE jobs_owner PASSWORD :'password_jobs_owner';
\endif
\if :{?password_jobfence_worker}
ALTER ROLE jobfence_worker PASSWORD :'password_jobfence_worker';
\endif
\if :{?password_jobfence_reaper}
ALTER ROLE jobfence_reaper PASSWORD :'password_jobfence_reaper';
\endif
\if :{?password_jobfence_relay}
ALTER ROLE jobfence_relay PASSWORD :'password_jobfence_relay';
\endif
\if :{?password_jobfence_api}
ALTER ROLE jobfence_api PASSWORD :'password_jobfence_api';
\endif
\if :{?password_jobfence_api_admin}
ALTER ROLE jobfence_api_admin PASSWORD :'password_jobfence_api_admin';
\endif
\if :{?password_jobfence_admin}
ALTER ROLE jobfence_admin PASSWORD :'password_jobfence_admin';
\endif

-- The database: created if missing, owned by jobs_owner (sqitch creates schemas jobs and
-- sqitch in it), and reachable only by the jobfence roles. LISTEN and NOTIFY need no
-- privilege, so CONNECT is what keeps other roles off the jobs_submitted channel.
SELECT format('CREATE DATABASE %I OWNER jobs_owner', :'db')
 WHERE NOT EXISTS (SELECT 1 FROM pg_catalog.pg_database WHERE datname = :'db')
\gexec
SELECT format('ALTER DATABASE %I OWNER TO jobs_owner', :'db')
\gexec
SELECT format('REVOKE CONNECT, TEMPORARY ON DATABASE %I FROM PUBLIC', :'db')
\gexec
SELECT format('GRANT CONNECT ON DATABASE %I TO jobs_producer, jobs_worker, jobs_admin', :'db')
\gexec

-- A schema an earlier deploy left owned by another role (a superuser, before this file
-- existed) is handed to jobs_owner, object by object: jobs_owner could not deploy over it.
\connect :db
SELECT format('ALTER SCHEMA %I OWNER TO jobs_owner', nspname)
  FROM pg_catalog.pg_namespace
 WHERE nspname IN ('jobs', 'sqitch') AND nspowner <> 'jobs_owner'::regrole
\gexec
SELECT format('ALTER %s %s OWNER TO jobs_owner',
              CASE c.relkind WHEN 'v' THEN 'VIEW' WHEN 'm' THEN 'MATERIALIZED VIEW'
                             WHEN 'S' THEN 'SEQUENCE' ELSE 'TABLE' END, c.oid::regclass)
  FROM pg_catalog.pg_class AS c
  JOIN pg_catalog.pg_namespace AS n ON n.oid = c.relnamespace
 WHERE n.nspname IN ('jobs', 'sqitch') AND c.relkind IN ('r', 'p', 'v', 'm', 'S')
   AND c.relowner <> 'jobs_owner'::regrole
   -- an identity or serial sequence follows its table
   AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_depend AS d
                    WHERE d.objid = c.oid AND d.classid = 'pg_class'::regclass
                      AND d.deptype IN ('a', 'i') AND c.relkind = 'S')
\gexec
SELECT format('ALTER ROUTINE %s OWNER TO jobs_owner', p.oid::regprocedure)
  FROM pg_catalog.pg_proc AS p
  JOIN pg_catalog.pg_namespace AS n ON n.oid = p.pronamespace
 WHERE n.nspname IN ('jobs', 'sqitch') AND p.proowner <> 'jobs_owner'::regrole
\gexec
SELECT format('ALTER TYPE %s OWNER TO jobs_owner', t.oid::regtype)
  FROM pg_catalog.pg_type AS t
  JOIN pg_catalog.pg_namespace AS n ON n.oid = t.typnamespace
  LEFT JOIN pg_catalog.pg_class AS c ON c.oid = t.typrelid
 WHERE n.nspname IN ('jobs', 'sqitch') AND t.typowner <> 'jobs_owner'::regrole
   AND t.typelem = 0 AND t.typcategory <> 'A'          -- array types follow their element
   AND (t.typrelid = 0 OR c.relkind = 'c')             -- a table's row type follows the table
\gexec

\if :{?example_app}
-- The example app (jobfence.examples, which docker-compose runs) keeps the transfer kind's
-- effects in a table of its own (app.table); with this switch the administrator may create it
-- when it declares the app (`jobfence worker --declare-only`), and the workers write to it.
-- scripts/run does without: the DBA runs `jobfence grants --app jobfence.examples:app`
-- instead, the recipe for an app of your own (docs/python.md), which needs no CREATE anywhere.
GRANT CREATE ON SCHEMA public TO jobfence_admin;
ALTER DEFAULT PRIVILEGES FOR ROLE jobfence_admin IN SCHEMA public
    GRANT SELECT, INSERT ON TABLES TO jobs_worker;
SELECT 'GRANT SELECT, INSERT ON public.jobfence_example_effect TO jobs_worker'
 WHERE to_regclass('public.jobfence_example_effect') IS NOT NULL
\gexec
\endif
