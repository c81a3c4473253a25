-- Deploy jobfence:redis_settings to pg
-- requires: jobs
BEGIN;
-- The deployment's name in Redis: every key the drivers use starts with it, so two
-- deployments (two databases) sharing one Redis database never pop each other's ids. Kept in
-- the schema, so every process of a deployment — whatever URL, role or pooler it connects
-- through — and a promoted standby or a restored backup agree on it. Random at deploy; an
-- administrator may set a readable one (jobs.configure_redis).
CREATE TABLE jobs.redis_settings (
    -- At most one row, so every reader sees the same setting.
    singleton  boolean PRIMARY KEY DEFAULT true CONSTRAINT redis_settings_one_row CHECK (singleton),
    namespace  text NOT NULL
               DEFAULT 'jobfence-' || substr(md5(random()::text || clock_timestamp()::text), 1, 10)
               -- No braces (the queue's Redis Cluster hash tag follows), nothing to quote.
               CONSTRAINT redis_settings_namespace_format CHECK (namespace ~ '^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$'),
    updated_at timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE jobs.redis_settings IS
    'The Redis namespace of this deployment (one row): the prefix of its keys, <namespace>:{queue}:ready. Read by jobs.redis_namespace, changed by jobs.configure_redis.';
REVOKE ALL ON jobs.redis_settings FROM PUBLIC;
INSERT INTO jobs.redis_settings DEFAULT VALUES;
COMMIT;
