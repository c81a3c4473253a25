-- Deploy jobfence:held_back to pg
-- requires: kind_limit
-- requires: queue_pause
-- requires: claimable
-- requires: signal
BEGIN;
CREATE OR REPLACE FUNCTION jobs.held_back(job_ids bigint[])
RETURNS SETOF jobs.signal
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
SET plan_cache_mode = force_generic_plan
-- The ids are read by primary key whatever the table's size when the plan was cached.
SET enable_seqscan = off
AS $$
BEGIN
    -- A worker asks after a claim that granted fewer ids than it popped: those a kind's limit
    -- held back have lost their signal, and nothing else would wake them while the queue's
    -- ready lists stay busy. Each comes back with a time to try again, spread so that a long
    -- line of waiting jobs is not re-popped all at once: for a rate, when its token is due;
    -- for max_running, one more second per max_running jobs ahead of it, at most 10 s.
    IF NOT EXISTS (SELECT 1 FROM jobs.kind_limit) THEN
        RETURN;
    END IF;
    RETURN QUERY
    WITH waiting AS (
        SELECT c.id, c.queue, c.priority, l.max_running, l.rate_limit, l.rate_period,
               least(l.rate_limit::double precision,
                     l.tokens + l.rate_limit * date_part('epoch', now() - l.refilled_at)
                                / date_part('epoch', l.rate_period)) AS tokens,
               row_number() OVER (PARTITION BY c.kind ORDER BY c.priority, c.id) AS rank
          FROM jobs.claimable AS c
          JOIN jobs.kind_limit AS l ON l.kind = c.kind
         WHERE c.id = ANY (held_back.job_ids)
           AND NOT EXISTS (SELECT 1 FROM jobs.queue_pause AS p WHERE p.queue = c.queue)
    )
    SELECT w.id, w.queue,
           now() + greatest(
               interval '200 milliseconds',
               CASE WHEN w.max_running IS NOT NULL
                    THEN least(interval '10 seconds', interval '1 second' * ceil(w.rank::numeric / w.max_running)) END,
               CASE WHEN w.rate_limit IS NOT NULL
                    THEN least(w.rate_period, w.rate_period * (greatest(w.rank - w.tokens, 0) / w.rate_limit)) END),
           w.priority
      FROM waiting AS w
     ORDER BY w.id;
END $$;
COMMENT ON FUNCTION jobs.held_back(bigint[]) IS
    'Of the given ids, the jobs claimable but for their kind''s global limit (max_running, rate_limit): where and when to push them again (run_after in the future, for the delayed set). Empty when no kind is limited. Granted to jobs_worker and jobs_admin.';
REVOKE ALL ON FUNCTION jobs.held_back(bigint[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jobs.held_back(bigint[]) TO jobs_worker, jobs_admin;
COMMIT;
