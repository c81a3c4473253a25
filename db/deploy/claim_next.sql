-- Deploy jobfence:claim_next to pg
-- requires: grant_leases
-- requires: check_worker
-- requires: queues
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
    queue_name text;
BEGIN
    PERFORM jobs.check_worker('jobs.claim_next', worker);
    IF max_jobs IS NULL OR max_jobs < 1 THEN
        RAISE EXCEPTION 'jobs.claim_next: max_jobs must be at least 1, got %', coalesce(max_jobs::text, 'NULL')
            USING ERRCODE = '22023', HINT = 'Ask for as many jobs as you have free slots.';
    END IF;
    -- SKIP LOCKED: concurrent workers take different jobs instead of queueing on one row.
    -- Oldest due first (run_after, id), read in index order: a plain "queue = ANY (queues)"
    -- could not use that order and would sort the whole backlog. Each statement is simple
    -- enough for a generic plan, so a call is not re-planned (see the SET clause).
    -- Every queue in use when none is named: the same per-queue reads, so the one index on
    -- queued jobs (queue, run_after, id) serves both forms.
    IF queues IS NULL THEN
        queues := ARRAY(SELECT q.queue FROM jobs.queues() AS q);
    END IF;
    -- Per queue, then the overall oldest win; rows locked but not picked are released
    -- when this transaction ends. status = 'queued' repeats the view's rule so the
    -- partial index can serve the scan.
    FOR queue_name IN SELECT DISTINCT q.name FROM unnest(claim_next.queues) AS q(name) WHERE q.name IS NOT NULL LOOP
        candidates := candidates || ARRAY(
            SELECT c.id FROM jobs.claimable AS c
             WHERE c.status = 'queued' AND c.queue = queue_name
             ORDER BY c.run_after, c.id
             LIMIT max_jobs
             FOR UPDATE SKIP LOCKED);
    END LOOP;
    picked := ARRAY(SELECT j.id FROM jobs.job AS j
                     WHERE j.id = ANY (candidates)
                     ORDER BY j.run_after, j.id
                     LIMIT max_jobs);
    RETURN QUERY SELECT * FROM jobs.grant_leases(picked, worker);
END $$;
COMMENT ON FUNCTION jobs.claim_next(text, text[], integer) IS
    'Claim up to max_jobs claimable jobs from the given queues (all when NULL), oldest due first, without Redis: SKIP LOCKED polling.';
REVOKE ALL ON FUNCTION jobs.claim_next(text, text[], integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jobs.claim_next(text, text[], integer) TO jobs_worker, jobs_admin;
COMMIT;
