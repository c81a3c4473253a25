-- Deploy jobfence:dead_letters to pg
-- requires: job
-- requires: event
BEGIN;
-- What a page about dead letters needs to say, for the ids a jobs_dead_lettered message
-- carried (docs/observability.md). A dead letter is a failed job whose last transition was
-- "exhausted" or "failed"; a cancelled job is not one.
CREATE OR REPLACE FUNCTION jobs.dead_letters(job_ids bigint[])
RETURNS TABLE (id bigint, kind text, queue text, error text, retry_count integer, max_retries integer,
               reason text, finished_at timestamptz)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
BEGIN
    IF job_ids IS NULL OR cardinality(job_ids) > 10000 THEN
        RAISE EXCEPTION 'jobs.dead_letters: job_ids must be an array of at most 10000 ids'
            USING ERRCODE = '22023', HINT = 'Pass the ids of a jobs_dead_lettered message.';
    END IF;
    RETURN QUERY
    SELECT j.id, j.kind, j.queue, j.error, j.retry_count, j.max_retries, last.reason, j.finished_at
      FROM (SELECT DISTINCT w.id FROM unnest(job_ids) AS w(id)) AS w
      JOIN jobs.job AS j ON j.id = w.id AND j.status = 'failed'
     -- The failing transition is written at the job's finished_at (both are its now()) and
     -- nothing follows it while the job stays failed: at = finished_at prunes the lookup to
     -- that day's partition (and the default one), however many days are kept.
     CROSS JOIN LATERAL (SELECT e.reason FROM jobs.event AS e
                          WHERE e.job_id = j.id AND e.at = j.finished_at
                          ORDER BY e.id DESC LIMIT 1) AS last
     WHERE last.reason IN ('exhausted', 'failed')
     ORDER BY j.id;
END $$;
COMMENT ON FUNCTION jobs.dead_letters(bigint[]) IS
    'Those of the given jobs that are dead letters (failed by exhaustion or a fatal error, not cancelled): id, kind, queue, error, retries, reason, finished_at. Granted to jobs_admin.';
REVOKE ALL ON FUNCTION jobs.dead_letters(bigint[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jobs.dead_letters(bigint[]) TO jobs_admin;
COMMIT;
