-- Deploy jobfence:keyed_queues to pg
-- requires: job_concurrency_key
-- requires: queues
-- requires: jobs_worker
-- requires: jobs_admin
BEGIN;
-- A worker that pops ids from Redis claims them by id (jobs.claim_many), in the order they
-- were pushed, which lets a key with a large backlog starve the others. In a queue named
-- here it claims as many jobs as it popped ids with jobs.claim_next instead, whose keys take
-- turns (docs/sql-api.md, "Per-key concurrency and fair claiming"). One probe of the partial
-- index on queued keyed jobs per queue, so a worker can ask every second.
CREATE OR REPLACE FUNCTION jobs.keyed_queues(queues text[] DEFAULT NULL)
RETURNS TABLE (queue text)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
    IF keyed_queues.queues IS NULL THEN
        keyed_queues.queues := ARRAY(SELECT q.queue FROM jobs.queues() AS q);
    END IF;
    RETURN QUERY
    SELECT n.name
      FROM (SELECT DISTINCT u.name FROM unnest(keyed_queues.queues) AS u(name) WHERE u.name IS NOT NULL) AS n
     WHERE EXISTS (SELECT 1 FROM jobs.job AS j
                    WHERE j.status = 'queued' AND j.queue = n.name AND j.concurrency_key IS NOT NULL)
     ORDER BY n.name;
END $$;
COMMENT ON FUNCTION jobs.keyed_queues(text[]) IS
    'Of the given queues (all when NULL), those holding a queued job with a concurrency_key, sorted by name: where a worker popping ids from Redis claims with jobs.claim_next, so that the keys take turns. Granted to jobs_worker and jobs_admin.';
REVOKE ALL ON FUNCTION jobs.keyed_queues(text[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jobs.keyed_queues(text[]) TO jobs_worker, jobs_admin;
COMMIT;
