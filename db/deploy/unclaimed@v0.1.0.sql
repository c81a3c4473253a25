-- Deploy jobfence:unclaimed to pg
-- requires: job
BEGIN;
-- Why popped ids were not granted, for a worker to count and to warn about what is not the
-- everyday case. Most misses are a duplicate signal or a job already done (not_claimable);
-- 'unknown' ids (no such job in this database) mostly mean another deployment shares the
-- Redis database, 'other_queue' an id pushed into the wrong queue's list: the worker says so.
CREATE OR REPLACE FUNCTION jobs.unclaimed(job_ids bigint[], queues text[] DEFAULT NULL)
RETURNS TABLE (job_id bigint, cause text)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
SET plan_cache_mode = force_generic_plan
-- The ids are read by primary key whatever the table's size when the plan was cached.
SET enable_seqscan = off
AS $$
BEGIN
    IF cardinality(unclaimed.job_ids) > 10000 THEN
        RAISE EXCEPTION 'jobs.unclaimed: % ids in one call; the limit is 10000', cardinality(unclaimed.job_ids)
            USING ERRCODE = '22023', HINT = 'Ask about one popped batch at a time.';
    END IF;
    RETURN QUERY
    SELECT i.id,
           CASE WHEN j.id IS NULL THEN 'unknown'
                WHEN unclaimed.queues IS NOT NULL AND j.queue <> ALL (unclaimed.queues) THEN 'other_queue'
                ELSE 'not_claimable' END
      FROM (SELECT DISTINCT u.id FROM unnest(unclaimed.job_ids) AS u(id) WHERE u.id IS NOT NULL) AS i
      LEFT JOIN jobs.job AS j ON j.id = i.id
     ORDER BY i.id;
END $$;
COMMENT ON FUNCTION jobs.unclaimed(bigint[], text[]) IS
    'Why the given ids (ones a claim did not grant) were not claimed: unknown (no such job), other_queue (not in queues), not_claimable (anything else: done, running, not due, a duplicate signal). One row per distinct id, by id; at most 10000 ids (more: 22023).';
REVOKE ALL ON FUNCTION jobs.unclaimed(bigint[], text[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jobs.unclaimed(bigint[], text[]) TO jobs_worker, jobs_admin;
COMMIT;
