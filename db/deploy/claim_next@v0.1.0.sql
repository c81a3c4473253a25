-- Deploy jobfence:claim_next to pg
-- requires: grant_leases
-- requires: check_worker
-- requires: queues
-- requires: queue_pause
-- requires: kind_limit
BEGIN;
CREATE OR REPLACE FUNCTION jobs.claim_next(worker text, queues text[] DEFAULT NULL, max_jobs integer DEFAULT 1)
RETURNS SETOF jobs.lease
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    picked bigint[];
    candidates bigint[] := '{}';
    candidate_priorities smallint[] := '{}';
    candidate_due timestamptz[] := '{}';
    found_ids bigint[];
    found_priorities smallint[];
    found_due timestamptz[];
    queue_name text;
    paused text[];
    full_kinds text[] := '{}';
BEGIN
    PERFORM jobs.check_worker('jobs.claim_next', worker);
    IF max_jobs IS NULL OR max_jobs < 1 THEN
        RAISE EXCEPTION 'jobs.claim_next: max_jobs must be at least 1, got %', coalesce(max_jobs::text, 'NULL')
            USING ERRCODE = '22023', HINT = 'Ask for as many jobs as you have free slots.';
    END IF;
    -- SKIP LOCKED: concurrent workers take different jobs instead of queueing on one row.
    -- Lowest priority value first, then oldest due (priority, run_after, id), read in index
    -- order: a plain "queue = ANY (queues)" could not use that order and would sort the
    -- whole backlog. Each statement is simple enough for a generic plan, so a call is not
    -- re-planned (see the SET clause). Every queue in use when none is named: the same
    -- per-queue reads, so the one index on queued jobs (queue, priority, run_after, id)
    -- serves both forms.
    IF queues IS NULL THEN
        queues := ARRAY(SELECT q.queue FROM jobs.queues() AS q);
    END IF;
    -- A paused queue is not read at all; grant_leases refuses its jobs anyway.
    paused := ARRAY(SELECT p.queue FROM jobs.queue_pause AS p);
    -- Kinds at their global limit are passed over, so that their backlog does not take the
    -- places of other kinds' jobs in max_jobs (grant_leases would refuse them anyway). Only
    -- leases still held count, as in jobs.admit_limited (one primary-key probe per slot:
    -- a join could become a scan of the job table), and only once the slots recorded, an
    -- upper bound read from their index alone, reach the limit.
    IF EXISTS (SELECT 1 FROM jobs.kind_limit) THEN
        full_kinds := ARRAY(
            SELECT l.kind FROM jobs.kind_limit AS l
             WHERE (l.max_running <= (SELECT count(*) FROM jobs.kind_slot AS s WHERE s.kind = l.kind)
                    AND l.max_running <= (SELECT count(*) FROM jobs.kind_slot AS s
                                           WHERE s.kind = l.kind
                                             AND (SELECT j.lease_version FROM jobs.job AS j
                                                   WHERE j.id = s.job_id
                                                     AND j.status IS NOT DISTINCT FROM 'processing') = s.lease_version))
                OR least(l.rate_limit::double precision,
                         l.tokens + l.rate_limit * date_part('epoch', now() - l.refilled_at)
                                    / date_part('epoch', l.rate_period)) < 1);
    END IF;
    -- Per queue, then the overall oldest win; rows locked but not picked are released
    -- when this transaction ends. status = 'queued' repeats the view's rule so the
    -- partial index can serve the scan.
    FOR queue_name IN SELECT DISTINCT q.name FROM unnest(claim_next.queues) AS q(name)
                       WHERE q.name IS NOT NULL AND q.name <> ALL (paused) LOOP
        SELECT array_agg(c.id), array_agg(c.priority), array_agg(c.run_after)
          INTO found_ids, found_priorities, found_due
          FROM (SELECT q.id, q.priority, q.run_after FROM jobs.claimable AS q
                 WHERE q.status = 'queued' AND q.queue = queue_name AND q.kind <> ALL (full_kinds)
                 ORDER BY q.priority, q.run_after, q.id
                 LIMIT max_jobs
                 FOR UPDATE SKIP LOCKED) AS c;
        candidates := candidates || coalesce(found_ids, '{}');
        candidate_priorities := candidate_priorities || coalesce(found_priorities, '{}');
        candidate_due := candidate_due || coalesce(found_due, '{}');
    END LOOP;
    -- The queues' candidates merged by the same order, from the values just read: no second
    -- read of the rows, whose plan (cached for the session) could be a scan of the table.
    picked := ARRAY(SELECT u.id FROM unnest(candidates, candidate_priorities, candidate_due) AS u(id, priority, due)
                     ORDER BY u.priority, u.due, u.id
                     LIMIT max_jobs);
    RETURN QUERY SELECT * FROM jobs.grant_leases(picked, worker, rows_locked => true);
END $$;
COMMENT ON FUNCTION jobs.claim_next(text, text[], integer) IS
    'Claim up to max_jobs claimable jobs from the given queues (all when NULL), lowest priority value then oldest due first, without Redis: SKIP LOCKED polling. Paused queues and kinds at their global limit are passed over.';
REVOKE ALL ON FUNCTION jobs.claim_next(text, text[], integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jobs.claim_next(text, text[], integer) TO jobs_worker, jobs_admin;
COMMIT;
