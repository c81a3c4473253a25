-- Deploy jobfence:end_unheld to pg
-- requires: job
-- requires: event
-- requires: tally
-- requires: release_dependents
BEGIN;
-- Internal: the queued/enqueue_failed -> failed transition, set-based: the one door for
-- ending a job nobody holds, the mirror of jobs.requeue_failed. jobs.cancel (reason
-- cancelled), jobs.reap (a spent budget: exhausted), jobs.insert_jobs and
-- jobs.release_dependents (a dependency failed: dependency_failed, a reason its change
-- event_reason_dependencies admits) call it; the caller has locked the rows. This function
-- owns the SET list, the event rows, the tally (and with it the dead-letter page of an
-- exhausted job) and the release of the jobs' dependents.
-- errors: the error each job ends with, errors[i] for job_ids[i] (a cascade of failed
-- dependencies names a different dependency per job, in one call).
CREATE OR REPLACE FUNCTION jobs.end_unheld(job_ids bigint[], reason text, errors text[])
RETURNS bigint[]
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
AS $$
DECLARE
    ended_ids bigint[];
    tallied integer;
    dead_letter boolean := end_unheld.reason = 'exhausted';
BEGIN
    IF reason IS NULL OR reason NOT IN ('cancelled', 'exhausted', 'dependency_failed') THEN
        RAISE EXCEPTION 'jobs.end_unheld: reason must be cancelled, exhausted or dependency_failed, got %', coalesce(reason, 'NULL')
            USING ERRCODE = '22023',
                  HINT = 'A job nobody holds ends cancelled (jobs.cancel), exhausted (jobs.reap) or dependency_failed (a dependency failed: jobs.release_dependents).';
    END IF;
    IF cardinality(errors) IS DISTINCT FROM cardinality(job_ids) THEN
        RAISE EXCEPTION 'jobs.end_unheld: % errors for % jobs', coalesce(cardinality(errors)::text, 'NULL'), coalesce(cardinality(job_ids)::text, 'NULL')
            USING ERRCODE = '22023', HINT = 'Give one error per job, in the order of job_ids.';
    END IF;
    WITH before AS (
        -- A job named twice ends once, with its first error.
        SELECT DISTINCT ON (o.id) o.id, o.status, g.error FROM jobs.job AS o
          JOIN unnest(end_unheld.job_ids, end_unheld.errors) WITH ORDINALITY AS g(id, error, ord) ON g.id = o.id
         WHERE o.id = ANY (end_unheld.job_ids) AND o.status IN ('queued', 'enqueue_failed')
         ORDER BY o.id, g.ord
    ), ended AS (
        UPDATE jobs.job AS j
           SET status = 'failed', finished_at = now(), updated_at = now(),
               -- A cancel says why; a spent budget keeps the last attempt's error, the useful one.
               error = CASE WHEN dead_letter THEN coalesce(j.error, b.error) ELSE b.error END
          FROM before AS b
         WHERE j.id = b.id
        RETURNING j.id, b.status AS was, j.lease_version, j.error, j.kind, j.due_at, j.retry_count
    ), logged AS (
        INSERT INTO jobs.event (job_id, at, from_status, to_status, lease_version, reason, error)
        SELECT e.id, now(), e.was, 'failed', e.lease_version, end_unheld.reason, e.error FROM ended AS e
    )
    -- No attempt ended here (no run time). A cancellation is the caller's decision, counted
    -- in cancelled alone, and so is a dependency's failure (the job never ran; its parent is
    -- the dead letter); an exhausted job is a dead letter, timed from when it was due.
    SELECT coalesce(array_agg(e.id ORDER BY e.id), '{}'),
           jobs.tally(array_agg(e.kind),
                      array_fill(CASE WHEN end_unheld.reason = 'exhausted' THEN 'exhausted' ELSE 'cancelled' END,
                                 ARRAY[count(*)::integer]), NULL, NULL, NULL,
                      CASE WHEN dead_letter THEN array_agg(date_part('epoch', now() - e.due_at)) END,
                      CASE WHEN dead_letter THEN array_agg(e.retry_count) END,
                      CASE WHEN dead_letter THEN array_agg(e.id) END)
      INTO ended_ids, tallied
      FROM ended AS e;
    IF cardinality(ended_ids) = 0 THEN
        RETURN '{}';
    END IF;
    -- Jobs that became claimable because these ended: a fan-in coordinator, the next of an
    -- ordering key.
    RETURN ARRAY(SELECT DISTINCT w.woken_id FROM jobs.release_dependents(ended_ids) AS w ORDER BY 1);
END $$;
COMMENT ON FUNCTION jobs.end_unheld(bigint[], text, text[]) IS
    'Internal: queued/enqueue_failed -> failed for the given (locked) jobs, the one door for ending a job nobody holds: reason cancelled (jobs.cancel; error = the given reason) or exhausted (jobs.reap; the job keeps its last error, else the given one, and gets its dead-letter page) or dependency_failed (jobs.insert_jobs, jobs.release_dependents; error = the given one, counted as cancelled), errors[i] for job_ids[i]; an event each, the tally, the dependents released. Returns the jobs it made claimable. 22023 for another reason or a count of errors other than of jobs. Not granted to any role.';
REVOKE ALL ON FUNCTION jobs.end_unheld(bigint[], text, text[]) FROM PUBLIC;
COMMIT;
