-- Deploy jobfence:claim_next to pg
-- requires: grant_leases
-- requires: check_worker
BEGIN;
CREATE OR REPLACE FUNCTION jobs.claim_next(worker text, queues text[] DEFAULT NULL, max_jobs integer DEFAULT 1)
RETURNS SETOF jobs.lease
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    picked bigint[];
BEGIN
    PERFORM jobs.check_worker('jobs.claim_next', worker);
    IF max_jobs IS NULL OR max_jobs < 1 THEN
        RAISE EXCEPTION 'jobs.claim_next: max_jobs must be at least 1, got %', coalesce(max_jobs::text, 'NULL')
            USING ERRCODE = '22023', HINT = 'Ask for as many jobs as you have free slots.';
    END IF;
    -- SKIP LOCKED: concurrent workers take different jobs instead of queueing on one row.
    -- Oldest due first (run_after, id). With several queues each gets its own index range
    -- scan (a plain "= ANY" could not use the index order), then the overall oldest win.
    IF queues IS NULL THEN
        picked := ARRAY(SELECT c.id FROM jobs.claimable AS c
                         ORDER BY c.run_after, c.id
                         LIMIT max_jobs
                         FOR UPDATE SKIP LOCKED);
    ELSE
        picked := ARRAY(SELECT due.id
                          FROM (SELECT DISTINCT q.name FROM unnest(claim_next.queues) AS q(name)) AS q
                         CROSS JOIN LATERAL (
                               SELECT c.id, c.run_after FROM jobs.claimable AS c
                                WHERE c.queue = q.name
                                ORDER BY c.run_after, c.id
                                LIMIT max_jobs
                                FOR UPDATE SKIP LOCKED) AS due
                         ORDER BY due.run_after, due.id
                         LIMIT max_jobs);
    END IF;
    RETURN QUERY SELECT * FROM jobs.grant_leases(picked, worker);
END $$;
COMMENT ON FUNCTION jobs.claim_next(text, text[], integer) IS
    'Claim up to max_jobs claimable jobs from the given queues (all when NULL), oldest due first, without Redis: SKIP LOCKED polling.';
REVOKE ALL ON FUNCTION jobs.claim_next(text, text[], integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jobs.claim_next(text, text[], integer) TO jobs_worker, jobs_admin;
COMMIT;
