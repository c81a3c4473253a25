-- Deploy jobfence:requeue_failed to pg
-- requires: job
-- requires: event
-- requires: signal
BEGIN;
-- Internal: the failed -> queued transition (a dead-letter re-drive), set-based, for
-- jobs.replay and jobs.replay_many. The caller has locked the rows and checked they are
-- failed; this function owns the SET list, the event rows and the coordinators' counts.
CREATE OR REPLACE FUNCTION jobs.requeue_failed(job_ids bigint[])
RETURNS SETOF jobs.signal
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
AS $$
DECLARE
    requeued_rows jobs.signal[];
    parent_ids bigint[];
BEGIN
    WITH requeued AS (
        UPDATE jobs.job AS j
           SET status = 'queued', retry_count = 0, snoozes = 0, lease_version = j.lease_version + 1,
               run_after = now(), finished_at = NULL, result = NULL, owned_by = NULL, claim_role = NULL,
               claimed_at = NULL, lease_expires_at = NULL, cancel_requested_at = NULL, updated_at = now()
         WHERE j.id = ANY (requeue_failed.job_ids)
           AND j.status = 'failed'
        RETURNING j.id, j.queue, j.run_after, j.priority, j.lease_version, j.parent_id, j.error
    ), logged AS (
        INSERT INTO jobs.event (job_id, at, from_status, to_status, lease_version, session_role, reason, error)
        SELECT r.id, now(), 'failed', 'queued', r.lease_version, quote_ident(session_user)::regrole, 'replayed', r.error
          FROM requeued AS r
    )
    SELECT coalesce(array_agg((r.id, r.queue, r.run_after, r.priority)::jobs.signal ORDER BY r.id), '{}'),
           coalesce(array_agg(r.parent_id) FILTER (WHERE r.parent_id IS NOT NULL), '{}')
      INTO requeued_rows, parent_ids
      FROM requeued AS r;
    -- pending_children counts unfinished children exactly: an unfinished child again makes a
    -- coordinator that has not run yet wait for it once more. A statement of its own: a
    -- coordinator replayed together with its child is a row the UPDATE above already changed,
    -- and a second change of it in that same statement would be skipped without a word.
    UPDATE jobs.job AS p
       SET pending_children = p.pending_children + c.n, updated_at = now()
      FROM (SELECT u.parent_id, count(*)::integer AS n FROM unnest(parent_ids) AS u(parent_id)
             GROUP BY u.parent_id) AS c
     WHERE p.id = c.parent_id;
    RETURN QUERY SELECT * FROM unnest(requeued_rows);
END $$;
COMMENT ON FUNCTION jobs.requeue_failed(bigint[]) IS
    'Internal: failed -> queued for the given (locked, failed) jobs with a fresh retry budget, lease_version + 1, a replayed event each, replayed children counted into their coordinators; returns the re-queued jobs. Not granted to any role.';
REVOKE ALL ON FUNCTION jobs.requeue_failed(bigint[]) FROM PUBLIC;
COMMIT;
