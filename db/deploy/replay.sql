-- Deploy jobfence:replay to pg
-- requires: job
-- requires: event
BEGIN;
CREATE OR REPLACE FUNCTION jobs.replay(job_id bigint)
RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    target jobs.job;
BEGIN
    SELECT * INTO target FROM jobs.job AS j WHERE j.id = replay.job_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'jobs.replay: job % not found', job_id
            USING ERRCODE = 'JB002', HINT = 'Check the id; pruned jobs no longer exist.';
    END IF;
    IF target.status = 'done' THEN
        -- It already succeeded: replaying is a no-op, exactly as idempotency promises.
        RETURN false;
    END IF;
    IF target.status <> 'failed' THEN
        RAISE EXCEPTION 'jobs.replay: job % is %, only failed jobs can be replayed', target.id, target.status
            USING ERRCODE = 'JB003', HINT = 'Wait until it ends; cancel it first if it must stop.';
    END IF;

    UPDATE jobs.job AS j
       SET status = 'queued', retry_count = 0, lease_version = j.lease_version + 1,
           run_after = now(), finished_at = NULL, result = NULL, owned_by = NULL, claimed_at = NULL,
           lease_expires_at = NULL, cancel_requested_at = NULL, updated_at = now()
     WHERE j.id = target.id
    RETURNING * INTO target;
    INSERT INTO jobs.event (job_id, at, from_status, to_status, lease_version, reason, error)
    VALUES (target.id, now(), 'failed', 'queued', target.lease_version, 'replayed', target.error);
    -- pending_children counts unfinished children exactly: an unfinished child again makes a
    -- coordinator that has not run yet wait for it once more.
    IF target.parent_id IS NOT NULL THEN
        UPDATE jobs.job AS p SET pending_children = p.pending_children + 1, updated_at = now()
         WHERE p.id = target.parent_id;
    END IF;
    RETURN true;
END $$;
COMMENT ON FUNCTION jobs.replay(bigint) IS
    'Dead-letter re-drive: failed -> queued with a fresh retry budget (lease_version + 1); returns true. done -> false (no-op). Other states: JB003. The caller signals the job afterwards.';
REVOKE ALL ON FUNCTION jobs.replay(bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jobs.replay(bigint) TO jobs_admin;
COMMIT;
