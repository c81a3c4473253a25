-- Deploy jobfence:list_jobs to pg
-- requires: job
-- requires: own_jobs_only
BEGIN;
-- Newest first, a page at a time, by keyset (before_id: the last id of the previous page), so
-- a page costs the same on the millionth page as on the first. Each status is read in its own
-- statement so the planner sees the status as a constant and can use that status's partial
-- index (failed, enqueue_failed, queued, processing are small next to done); done and "any"
-- walk the primary key backwards.
CREATE OR REPLACE FUNCTION jobs.list_jobs(kind text DEFAULT NULL, status jobs.status DEFAULT NULL,
                                          before_id bigint DEFAULT NULL, max_jobs integer DEFAULT 100,
                                          queue text DEFAULT NULL, ordering_key text DEFAULT NULL)
RETURNS SETOF jobs.job
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
DECLARE
    below bigint := coalesce(before_id, 9223372036854775807);
    -- With producer ownership on, a producer pages through its own jobs only.
    mine regrole := CASE WHEN jobs.own_jobs_only(reading => true) THEN quote_ident(session_user)::regrole END;
BEGIN
    IF max_jobs IS NULL OR max_jobs NOT BETWEEN 1 AND 1000 THEN
        RAISE EXCEPTION 'jobs.list_jobs: max_jobs must be between 1 and 1000, got %', coalesce(max_jobs::text, 'NULL')
            USING ERRCODE = '22023', HINT = 'Page with before_id = the last id of the previous page.';
    END IF;
    IF list_jobs.ordering_key IS NOT NULL THEN
        -- One key's jobs, every status: job_ordering_key_idx walks the key backwards.
        RETURN QUERY SELECT j.* FROM jobs.job AS j
                      WHERE j.ordering_key = list_jobs.ordering_key AND j.id < below
                        AND (list_jobs.status IS NULL OR j.status = list_jobs.status)
                        AND (list_jobs.kind IS NULL OR j.kind = list_jobs.kind)
                        AND (list_jobs.queue IS NULL OR j.queue = list_jobs.queue)
                        AND (mine IS NULL OR j.submitted_by = mine)
                      ORDER BY j.ordering_key DESC, j.id DESC LIMIT max_jobs;
    ELSIF status IS NULL THEN
        RETURN QUERY SELECT j.* FROM jobs.job AS j
                      WHERE j.id < below AND (list_jobs.kind IS NULL OR j.kind = list_jobs.kind)
                        AND (list_jobs.queue IS NULL OR j.queue = list_jobs.queue)
                        AND (mine IS NULL OR j.submitted_by = mine)
                      ORDER BY j.id DESC LIMIT max_jobs;
    ELSIF status = 'failed' THEN
        RETURN QUERY SELECT j.* FROM jobs.job AS j
                      WHERE j.status = 'failed' AND j.id < below AND (list_jobs.kind IS NULL OR j.kind = list_jobs.kind)
                        AND (list_jobs.queue IS NULL OR j.queue = list_jobs.queue)
                        AND (mine IS NULL OR j.submitted_by = mine)
                      ORDER BY j.id DESC LIMIT max_jobs;
    ELSIF status = 'queued' THEN
        RETURN QUERY SELECT j.* FROM jobs.job AS j
                      WHERE j.status = 'queued' AND j.id < below AND (list_jobs.kind IS NULL OR j.kind = list_jobs.kind)
                        AND (list_jobs.queue IS NULL OR j.queue = list_jobs.queue)
                        AND (mine IS NULL OR j.submitted_by = mine)
                      ORDER BY j.id DESC LIMIT max_jobs;
    ELSIF status = 'processing' THEN
        RETURN QUERY SELECT j.* FROM jobs.job AS j
                      WHERE j.status = 'processing' AND j.id < below AND (list_jobs.kind IS NULL OR j.kind = list_jobs.kind)
                        AND (list_jobs.queue IS NULL OR j.queue = list_jobs.queue)
                        AND (mine IS NULL OR j.submitted_by = mine)
                      ORDER BY j.id DESC LIMIT max_jobs;
    ELSIF status = 'enqueue_failed' THEN
        RETURN QUERY SELECT j.* FROM jobs.job AS j
                      WHERE j.status = 'enqueue_failed' AND j.id < below AND (list_jobs.kind IS NULL OR j.kind = list_jobs.kind)
                        AND (list_jobs.queue IS NULL OR j.queue = list_jobs.queue)
                        AND (mine IS NULL OR j.submitted_by = mine)
                      ORDER BY j.id DESC LIMIT max_jobs;
    ELSE
        RETURN QUERY SELECT j.* FROM jobs.job AS j
                      WHERE j.status = 'done' AND j.id < below AND (list_jobs.kind IS NULL OR j.kind = list_jobs.kind)
                        AND (list_jobs.queue IS NULL OR j.queue = list_jobs.queue)
                        AND (mine IS NULL OR j.submitted_by = mine)
                      ORDER BY j.id DESC LIMIT max_jobs;
    END IF;
END $$;
COMMENT ON FUNCTION jobs.list_jobs(text, jobs.status, bigint, integer, text, text) IS
    'Jobs newest first, optionally of one kind, one status, one queue and one ordering key, at most max_jobs (1-1000) with id < before_id: keyset pages. Granted to jobs_producer and jobs_admin.';
REVOKE ALL ON FUNCTION jobs.list_jobs(text, jobs.status, bigint, integer, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jobs.list_jobs(text, jobs.status, bigint, integer, text, text) TO jobs_producer, jobs_admin;
COMMIT;
