-- Deploy jobfence:mark_enqueue_failed to pg
-- requires: job
-- requires: event
-- requires: own_jobs_only
BEGIN;
CREATE OR REPLACE FUNCTION jobs.mark_enqueue_failed(job_ids bigint[])
RETURNS integer
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
AS $$
DECLARE
    marked integer;
    confined boolean := jobs.own_jobs_only(reading => false);
BEGIN
    IF job_ids IS NULL THEN
        RAISE EXCEPTION 'jobs.mark_enqueue_failed: job_ids must be an array, not NULL'
            USING ERRCODE = '22023', HINT = 'Pass the ids whose Redis push failed, e.g. ARRAY[42].';
    END IF;
    -- As many as one submit_many may create: a producer parks one failed push per call.
    IF cardinality(job_ids) > 10000 THEN
        RAISE EXCEPTION 'jobs.mark_enqueue_failed: % ids in one call; the limit is 10000', cardinality(job_ids)
            USING ERRCODE = '22023', HINT = 'Mark the ids of one failed push at a time, at most 10000 per call.';
    END IF;
    -- Only jobs still queued: one a worker already claimed (the push did reach someone,
    -- or a duplicate signal did) needs no recovery. Only jobs written in the last minute: a
    -- caller parks what it just failed to push, not the whole backlog (an older queued job
    -- whose push failed is found again by stale_queued). With producer ownership on, only
    -- the caller's own jobs (jobs_admin members: any).
    WITH marked_jobs AS (
        UPDATE jobs.job AS j
           SET status = 'enqueue_failed', updated_at = now()
         WHERE j.id = ANY (mark_enqueue_failed.job_ids) AND j.status IS NOT DISTINCT FROM 'queued'
           AND j.updated_at >= now() - interval '1 minute'
           AND (NOT confined OR j.submitted_by = quote_ident(session_user)::regrole)
        RETURNING j.id, j.lease_version
    ), logged AS (
        INSERT INTO jobs.event (job_id, at, from_status, to_status, lease_version, reason)
        SELECT m.id, now(), 'queued', 'enqueue_failed', m.lease_version, 'enqueue_failed' FROM marked_jobs AS m
    )
    SELECT count(*) INTO marked FROM marked_jobs;
    RETURN marked;
END $$;
COMMENT ON FUNCTION jobs.mark_enqueue_failed(bigint[]) IS
    'Record that the Redis push after commit failed (queued -> enqueue_failed) for at most 10000 ids (more: 22023) of jobs still queued and written in the last minute (with jobs.producer_policy.ownership on: the caller''s own, but for jobs_admin members); others are skipped. Returns how many were marked.';
REVOKE ALL ON FUNCTION jobs.mark_enqueue_failed(bigint[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jobs.mark_enqueue_failed(bigint[]) TO jobs_producer, jobs_admin;
COMMIT;
