-- Deploy jobfence:page_backlog to pg
-- requires: page
-- requires: jobs_admin
BEGIN;
-- The figures the alert on undelivered pages needs (the exporter): how many wait, how many
-- of those a forwarder already tried, and when the oldest was written. One index scan of
-- the undelivered rows, which are few unless the webhook is away.
CREATE OR REPLACE FUNCTION jobs.page_backlog()
RETURNS TABLE (undelivered bigint, failing bigint, oldest_at timestamptz)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
    SELECT count(*), count(*) FILTER (WHERE p.attempts > 0), min(p.created_at)
      FROM jobs.page AS p
     WHERE p.delivered_at IS NULL;
$$;
COMMENT ON FUNCTION jobs.page_backlog() IS
    'Undelivered dead-letter pages: how many, how many already attempted, the oldest''s created_at. Granted to jobs_admin.';
REVOKE ALL ON FUNCTION jobs.page_backlog() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jobs.page_backlog() TO jobs_admin;
COMMIT;
