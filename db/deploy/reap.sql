-- Deploy jobfence:reap to pg
-- requires: signal
-- requires: release_dependents
BEGIN;
CREATE OR REPLACE FUNCTION jobs.reap(max_jobs integer DEFAULT 1000)
RETURNS SETOF jobs.signal
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
DECLARE
    requeued jobs.signal[];
    ended bigint[];
    overspent bigint[];
BEGIN
    IF max_jobs IS NULL OR max_jobs < 1 THEN
        RAISE EXCEPTION 'jobs.reap: max_jobs must be at least 1, got %', coalesce(max_jobs::text, 'NULL')
            USING ERRCODE = '22023', HINT = 'Call again while it keeps returning rows.';
    END IF;

    -- Safe by construction: SKIP LOCKED hands each expired lease to exactly one reaper, the
    -- lease_version bump fences the old owner out, and heartbeats never extend a lease past
    -- claimed_at + timeout, so a hung job is caught even while it keeps heartbeating.
    WITH expired AS (
        SELECT j.id, j.owned_by AS lost_by,
               j.cancel_requested_at IS NULL AND j.retry_count + 1 <= j.max_retries AS requeue
          FROM jobs.job AS j
         WHERE j.status = 'processing' AND j.lease_expires_at <= now()
         ORDER BY j.lease_expires_at, j.id
         LIMIT max_jobs
           FOR UPDATE SKIP LOCKED
    ), reaped AS (
        UPDATE jobs.job AS j
           SET status = CASE WHEN e.requeue THEN 'queued' ELSE 'failed' END::jobs.status,
               retry_count = j.retry_count + 1,
               error = 'lease expired',
               result = NULL,
               owned_by = NULL,
               claimed_at = NULL,
               lease_expires_at = NULL,
               lease_version = j.lease_version + CASE WHEN e.requeue THEN 1 ELSE 0 END,
               run_after = CASE WHEN e.requeue THEN now() ELSE j.run_after END,
               finished_at = CASE WHEN e.requeue THEN NULL ELSE now() END,
               updated_at = now()
          FROM expired AS e
         WHERE j.id = e.id
        RETURNING j.id, j.queue, j.run_after, j.status, j.lease_version, j.cancel_requested_at, e.lost_by
    ), logged AS (
        INSERT INTO jobs.event (job_id, at, from_status, to_status, lease_version, worker, reason, error)
        SELECT r.id, now(), 'processing', r.status, r.lease_version, r.lost_by,
               CASE WHEN r.status = 'queued' THEN 'reaped'
                    WHEN r.cancel_requested_at IS NOT NULL THEN 'cancelled'
                    ELSE 'exhausted' END,
               'lease expired'
          FROM reaped AS r
    )
    SELECT coalesce(array_agg((r.id, r.queue, r.run_after)::jobs.signal ORDER BY r.id)
                        FILTER (WHERE r.status = 'queued'), '{}'),
           coalesce(array_agg(r.id) FILTER (WHERE r.status = 'failed'), '{}')
      INTO requeued, ended
      FROM reaped AS r;

    -- Queued jobs whose budget is already spent (retry_count > max_retries, e.g. after a
    -- hand edit) must not run again. The partial index keeps this free when there are none.
    WITH spent AS (
        SELECT o.id, o.status AS was
          FROM jobs.job AS o
         WHERE o.status IN ('queued', 'enqueue_failed') AND o.retry_count > o.max_retries
         ORDER BY o.id
         LIMIT max_jobs
           FOR UPDATE SKIP LOCKED
    ), failed_now AS (
        UPDATE jobs.job AS j
           SET status = 'failed', finished_at = now(), updated_at = now(),
               error = coalesce(j.error, 'retry budget exhausted')
          FROM spent AS s
         WHERE j.id = s.id
        RETURNING j.id, s.was, j.lease_version, j.error
    ), logged AS (
        INSERT INTO jobs.event (job_id, at, from_status, to_status, lease_version, reason, error)
        SELECT f.id, now(), f.was, 'failed', f.lease_version, 'exhausted', f.error FROM failed_now AS f
    )
    SELECT coalesce(array_agg(f.id), '{}') INTO overspent FROM failed_now AS f;

    RETURN QUERY SELECT * FROM unnest(requeued);
    -- Jobs that became claimable because a reaped job ended (fan-in coordinator, next of an ordering key).
    RETURN QUERY
    SELECT DISTINCT j.id, j.queue, j.run_after
      FROM jobs.release_dependents(ended || overspent) AS w
      JOIN jobs.job AS j ON j.id = w.woken_id;
END $$;
COMMENT ON FUNCTION jobs.reap(integer) IS
    'Recover up to max_jobs expired leases: back to queued at once (lease_version + 1, error ''lease expired'') while the retry budget lasts, else failed. Returns the jobs to push: requeued ones and ones woken by jobs it failed.';
REVOKE ALL ON FUNCTION jobs.reap(integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jobs.reap(integer) TO jobs_admin;
COMMIT;
