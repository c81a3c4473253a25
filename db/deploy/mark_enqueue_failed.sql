-- Deploy jobfence:mark_enqueue_failed to pg
-- requires: job
-- requires: event
BEGIN;
CREATE OR REPLACE FUNCTION jobs.mark_enqueue_failed(job_ids bigint[])
RETURNS integer
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    marked integer;
BEGIN
    IF job_ids IS NULL THEN
        RAISE EXCEPTION 'jobs.mark_enqueue_failed: job_ids must be an array, not NULL'
            USING ERRCODE = '22023', HINT = 'Pass the ids whose Redis push failed, e.g. ARRAY[42].';
    END IF;
    -- Only jobs still queued: one a worker already claimed (the push did reach someone,
    -- or a duplicate signal did) needs no recovery.
    WITH marked_jobs AS (
        UPDATE jobs.job AS j
           SET status = 'enqueue_failed', updated_at = now()
         WHERE j.id = ANY (mark_enqueue_failed.job_ids) AND j.status IS NOT DISTINCT FROM 'queued'
        RETURNING j.id, j.lease_version
    ), logged AS (
        INSERT INTO jobs.event (job_id, at, from_status, to_status, lease_version, reason)
        SELECT m.id, now(), 'queued', 'enqueue_failed', m.lease_version, 'enqueue_failed' FROM marked_jobs AS m
    )
    SELECT count(*) INTO marked FROM marked_jobs;
    RETURN marked;
END $$;
COMMENT ON FUNCTION jobs.mark_enqueue_failed(bigint[]) IS
    'Record that the Redis push after commit failed (queued -> enqueue_failed) for the jobs still queued; others are skipped. Returns how many were marked.';
REVOKE ALL ON FUNCTION jobs.mark_enqueue_failed(bigint[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jobs.mark_enqueue_failed(bigint[]) TO jobs_producer, jobs_admin;
COMMIT;
