-- Deploy jobfence:progress to pg
-- requires: job
-- requires: heartbeat_type
-- requires: check_worker
-- requires: hold_lease
BEGIN;
-- A running handler says how far it got. Only the lease holder may say it (the heartbeat's
-- authority predicate, jobs.extend_leases), and saying it is proof of life, so the lease is
-- extended as by a heartbeat. Not a transition: no event row, the status does not change.
CREATE OR REPLACE FUNCTION jobs.progress(job_id bigint, worker text, lease_version bigint, progress jsonb,
                                         token uuid DEFAULT NULL)
RETURNS jobs.heartbeat
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    answer jobs.heartbeat;
BEGIN
    PERFORM jobs.check_worker('jobs.progress', worker);
    IF octet_length(progress::text) > 65536 THEN
        RAISE EXCEPTION 'jobs.progress: the progress is % bytes as JSON text, over the limit of 65536 (64 KiB)',
            octet_length(progress::text)
            USING ERRCODE = '22023', HINT = 'Report a few numbers and a short message; results belong in complete.';
    END IF;
    -- As a payload's (insert_jobs): readers could not decode the job any more.
    IF octet_length(progress::text) >= 309 AND progress::text ~ '[0-9]{255}'
       AND jsonb_path_exists(progress, 'strict $.**{0 to 1000} ? (@.type() == "number" && (@ > 1.7976931348623157e308 || @ < -1.7976931348623157e308))') THEN
        RAISE EXCEPTION 'jobs.progress: the progress holds a number beyond the IEEE-754 double range (greater than 1.7976931348623157e308 in magnitude)'
            USING ERRCODE = '22003',
                  HINT = 'JSON readers (JavaScript, Python, Go, ...) cannot decode it: report such a number as a string.';
    END IF;
    answer := jobs.hold_lease('jobs.progress', job_id, worker, lease_version, token);
    -- hold_lease locked the row for this transaction: the lease cannot change under us.
    UPDATE jobs.job AS j
       SET progress = progress.progress, progress_at = now()
     WHERE j.id = progress.job_id;
    RETURN answer;
END $$;
COMMENT ON FUNCTION jobs.progress(bigint, text, bigint, jsonb, uuid) IS
    'Store the running job''s progress (any JSON up to 64 KiB; NULL clears it), readable through jobs.get (progress, progress_at); extends the lease like jobs.heartbeat and answers the same. JB001 when the lease is not held (token checked as in heartbeat). 22023 over 64 KiB; 22003 for a number beyond the IEEE-754 double range.';
REVOKE ALL ON FUNCTION jobs.progress(bigint, text, bigint, jsonb, uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jobs.progress(bigint, text, bigint, jsonb, uuid) TO jobs_worker, jobs_admin;
COMMIT;
