-- Deploy jobfence:pages to pg
-- requires: page
-- requires: jobs_admin
BEGIN;
-- What the dead-letter pages are doing (jobfence pages, the exporter): the undelivered ones
-- first, oldest first, with their last error; with undelivered_only false the most recent
-- delivered ones follow.
CREATE OR REPLACE FUNCTION jobs.pages(undelivered_only boolean DEFAULT true, max_pages integer DEFAULT 100)
RETURNS SETOF jobs.page
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
BEGIN
    IF max_pages IS NULL OR max_pages < 1 OR max_pages > 10000 THEN
        RAISE EXCEPTION 'jobs.pages: max_pages must be between 1 and 10000, got %', max_pages
            USING ERRCODE = '22023', HINT = 'jobfence pages --limit N.';
    END IF;
    RETURN QUERY
    (SELECT p.* FROM jobs.page AS p WHERE p.delivered_at IS NULL ORDER BY p.due_at, p.id LIMIT max_pages)
    UNION ALL
    (SELECT p.* FROM jobs.page AS p
      WHERE NOT coalesce(undelivered_only, true) AND p.delivered_at IS NOT NULL
      ORDER BY p.id DESC LIMIT max_pages);
END $$;
COMMENT ON FUNCTION jobs.pages(boolean, integer) IS
    'Dead-letter pages: the undelivered ones (oldest due first, with attempts and last error), then, unless undelivered_only, the latest delivered. Granted to jobs_admin.';
REVOKE ALL ON FUNCTION jobs.pages(boolean, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jobs.pages(boolean, integer) TO jobs_admin;
COMMIT;
