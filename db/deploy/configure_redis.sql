-- Deploy jobfence:configure_redis to pg
-- requires: redis_settings
-- requires: jobs_admin
BEGIN;
-- The one way to change the Redis namespace: an admin call. Processes read it at start, so a
-- change applies as they restart; what was in the old keys is re-pushed by the reapers'
-- stale sweep (PostgreSQL keeps every job). NULL leaves it as it is; no arguments reads it.
CREATE OR REPLACE FUNCTION jobs.configure_redis(namespace text DEFAULT NULL)
RETURNS TABLE (redis_namespace text, updated_at timestamptz)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
BEGIN
    IF configure_redis.namespace IS NOT NULL THEN
        IF configure_redis.namespace !~ '^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$' THEN
            RAISE EXCEPTION 'jobs.configure_redis: namespace % is malformed', quote_literal(left(configure_redis.namespace, 100))
                USING ERRCODE = '22023',
                      HINT = 'A namespace is 1-64 of A-Z a-z 0-9 _ . : - starting with a letter or digit, e.g. ''billing-prod''.';
        END IF;
        UPDATE jobs.redis_settings AS r
           SET namespace = configure_redis.namespace, updated_at = now()
         WHERE r.singleton;
    END IF;
    RETURN QUERY SELECT r.namespace, r.updated_at FROM jobs.redis_settings AS r;
END $$;
COMMENT ON FUNCTION jobs.configure_redis(text) IS
    'Read or set the Redis namespace of this deployment (random at deploy). NULL keeps it; 22023 for a malformed one. Processes pick a change up when they restart. Granted to jobs_admin.';
REVOKE ALL ON FUNCTION jobs.configure_redis(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jobs.configure_redis(text) TO jobs_admin;
COMMIT;
