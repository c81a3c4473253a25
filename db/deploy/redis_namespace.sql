-- Deploy jobfence:redis_namespace to pg
-- requires: redis_settings
-- requires: jobs_producer
-- requires: jobs_worker
-- requires: jobs_admin
BEGIN;
-- What every process that touches Redis asks once at start: the prefix of its keys.
CREATE OR REPLACE FUNCTION jobs.redis_namespace()
RETURNS text
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
BEGIN
    RETURN (SELECT r.namespace FROM jobs.redis_settings AS r);
END $$;
COMMENT ON FUNCTION jobs.redis_namespace() IS
    'The Redis namespace of this deployment: its keys are <namespace>:{queue}:ready[:pN] and <namespace>:{queue}:delayed[:pN]. Roles: jobs_producer, jobs_worker, jobs_admin.';
REVOKE ALL ON FUNCTION jobs.redis_namespace() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jobs.redis_namespace() TO jobs_producer, jobs_worker, jobs_admin;
COMMIT;
