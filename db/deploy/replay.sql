-- Deploy jobfence:replay to pg
-- requires: job
-- requires: event
-- requires: requeue_failed
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

    PERFORM jobs.requeue_failed(ARRAY[target.id]);
    RETURN true;
END $$;
COMMENT ON FUNCTION jobs.replay(bigint) IS
    'Dead-letter re-drive: failed -> queued with a fresh retry budget (lease_version + 1); returns true. done -> false (no-op). Other states: JB003. The caller signals the job afterwards.';
REVOKE ALL ON FUNCTION jobs.replay(bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jobs.replay(bigint) TO jobs_admin;
COMMIT;
