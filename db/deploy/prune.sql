-- Deploy jobfence:prune to pg
-- requires: job
-- requires: event
-- requires: metric_minute
-- reads at run time: event_retention, page (later changes in the plan; plpgsql resolves them per call)
BEGIN;
CREATE OR REPLACE FUNCTION jobs.prune(older_than interval DEFAULT '7 days', max_jobs integer DEFAULT NULL)
RETURNS bigint
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
DECLARE
    cutoff timestamptz;
    batch_size constant integer := 5000;
    deleted integer;
    total bigint := 0;
BEGIN
    IF older_than IS NULL OR older_than < interval '0' OR older_than > interval '100 years' THEN
        RAISE EXCEPTION 'jobs.prune: older_than must be a non-negative interval of at most 100 years'
            USING ERRCODE = '22023', HINT = 'E.g. ''7 days''. Only done and failed jobs are ever deleted.';
    END IF;
    IF max_jobs IS NOT NULL AND max_jobs < 1 THEN
        RAISE EXCEPTION 'jobs.prune: max_jobs must be at least 1 (or NULL for all), got %', max_jobs
            USING ERRCODE = '22023', HINT = 'Call again while it returns max_jobs: each call is its own transaction.';
    END IF;
    cutoff := now() - older_than;
    -- Batches of row-level deletes through the finished_at index: no table lock, and
    -- SKIP LOCKED means a concurrent replay or read never waits on the pruner.
    -- A child stays while its coordinator is kept, so children() stays complete. A job's
    -- events in the day partitions stay until jobs.drop_event_partitions drops those whole
    -- (no row deletes, no dead tuples for vacuum); only the default partition, which is never
    -- dropped, loses the pruned jobs' rows here (normally none: one index probe per job).
    LOOP
        WITH victims AS (
            SELECT j.id
              FROM jobs.job AS j
             WHERE j.status IN ('done', 'failed')
               AND j.finished_at < cutoff
               AND NOT EXISTS (
                       SELECT 1 FROM jobs.job AS p
                        WHERE p.id = j.parent_id
                          AND NOT (p.status IN ('done', 'failed') AND p.finished_at < cutoff))
             ORDER BY j.finished_at
             LIMIT least(batch_size, coalesce(max_jobs - total, batch_size))
               FOR UPDATE SKIP LOCKED
        ), gone AS (
            DELETE FROM jobs.job AS j USING victims AS v WHERE j.id = v.id RETURNING j.id
        ), history AS (
            DELETE FROM jobs.event_default AS e USING gone AS g WHERE e.job_id = g.id
        )
        SELECT count(*) INTO deleted FROM gone;
        total := total + deleted;
        -- A bounded call (max_jobs) holds its row locks only for its own slice: the reaper
        -- and `jobfence prune` call again in new transactions.
        EXIT WHEN deleted < batch_size OR total >= coalesce(max_jobs, total + 1);
    END LOOP;
    -- The histories of the jobs just deleted wait for their partitions to be dropped:
    -- jobs.audit accepts a history without its job only if it ended before this horizon.
    IF total > 0 THEN
        INSERT INTO jobs.event_retention AS r (released_before) VALUES (cutoff)
            ON CONFLICT (singleton) DO UPDATE SET released_before = excluded.released_before, updated_at = now()
            WHERE r.released_before < excluded.released_before;
    END IF;
    -- Pages: a delivered one goes with the same retention. An undelivered one that a forwarder
    -- has tried stays until it is delivered, however long the webhook is away; one no
    -- forwarder ever tried (no webhook is configured) goes like a delivered one, or the
    -- table would keep a row per dead letter for ever.
    DELETE FROM jobs.page AS pg
     WHERE pg.created_at < cutoff AND (pg.delivered_at IS NOT NULL OR pg.attempts = 0);
    -- The rollup follows the same retention: metrics never describe a window whose jobs are gone.
    DELETE FROM jobs.metric_minute AS m WHERE m.minute < date_trunc('minute', cutoff);
    RETURN total;
END $$;
COMMENT ON FUNCTION jobs.prune(interval, integer) IS
    'Retention: delete done/failed jobs whose finished_at is older than older_than (at most max_jobs when given), in batches, metric minutes and pages older than the cutoff (an undelivered page a forwarder has tried is kept until delivered). A child is kept while its coordinator is. Their events go when jobs.drop_event_partitions drops their day partitions (those in jobs.event_default go here). Returns the number of jobs deleted.';
REVOKE ALL ON FUNCTION jobs.prune(interval, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jobs.prune(interval, integer) TO jobs_admin;
COMMIT;
