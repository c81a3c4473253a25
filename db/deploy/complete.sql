-- Deploy jobfence:complete to pg
-- requires: outcome
-- requires: raise_lease_lost
-- requires: release_dependents
-- requires: check_worker
BEGIN;
CREATE OR REPLACE FUNCTION jobs.complete(job_id bigint, worker text, lease_version bigint, result jsonb DEFAULT NULL)
RETURNS jobs.outcome
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    finished jobs.job;
BEGIN
    PERFORM jobs.check_worker('jobs.complete', worker);
    -- Authority predicate inline: only the current lease holder writes. Raising on failure
    -- (rather than returning accepted = false) rolls back effects the caller wrote in the
    -- same transaction.
    UPDATE jobs.job AS j
       SET status = 'done', result = complete.result, finished_at = now(), updated_at = now(),
           lease_expires_at = NULL
     WHERE j.id = complete.job_id
       AND j.status = 'processing'
       AND j.owned_by = complete.worker
       AND j.lease_version = complete.lease_version
    RETURNING * INTO finished;
    IF NOT FOUND THEN
        PERFORM jobs.raise_lease_lost('jobs.complete', job_id, worker, lease_version);
    END IF;
    INSERT INTO jobs.event (job_id, at, from_status, to_status, lease_version, worker, reason)
    VALUES (finished.id, now(), 'processing', 'done', finished.lease_version, complete.worker, 'completed');
    RETURN (finished.id, true, finished.status, finished.run_after,
            ARRAY(SELECT w.woken_id FROM jobs.release_dependents(ARRAY[finished.id]) AS w ORDER BY w.woken_id))::jobs.outcome;
END $$;
COMMENT ON FUNCTION jobs.complete(bigint, text, bigint, jsonb) IS
    'Finish a job with its result (processing -> done) if worker still holds lease_version. JB001 otherwise (nothing written), JB002 for an unknown job. wake lists jobs this made claimable.';
REVOKE ALL ON FUNCTION jobs.complete(bigint, text, bigint, jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jobs.complete(bigint, text, bigint, jsonb) TO jobs_worker, jobs_admin;
COMMIT;
