-- Deploy jobfence:claim_next to pg
-- requires: grant_leases
-- requires: check_worker
-- requires: queues
-- requires: queue_pause
-- requires: kind_limit
-- requires: kind_limit_per_key
-- requires: job_concurrency_key
-- requires: claimable
-- requires: live_slot
BEGIN;
CREATE OR REPLACE FUNCTION jobs.claim_next(worker text, queues text[] DEFAULT NULL, max_jobs integer DEFAULT 1)
RETURNS SETOF jobs.lease
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
SET plan_cache_mode = force_generic_plan
-- The window of a keyed queue's jobs without a key is read by primary key (id = ANY), whatever
-- the table's size when the session cached the plan.
SET enable_seqscan = off
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
    -- 'kind key' of the (kind, concurrency_key) pairs at their max_running_per_key (a space
    -- is in no kind name, so the pair reads back unambiguously).
    full_pairs text[] := '{}';
    turn_keys text[];
    share integer;
    candidate_rounds bigint[] := '{}';
    found_rounds bigint[];
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
    -- leases still held count (jobs.live_slot, the rule jobs.admit_limited prunes by), and
    -- only once the slots recorded, an upper bound read from their index alone, reach the
    -- limit.
    IF EXISTS (SELECT 1 FROM jobs.kind_limit) THEN
        full_kinds := ARRAY(
            SELECT l.kind FROM jobs.kind_limit AS l
             WHERE (l.max_running <= (SELECT count(*) FROM jobs.kind_slot AS s WHERE s.kind = l.kind)
                    AND l.max_running <= (SELECT count(*) FROM jobs.live_slot AS s WHERE s.kind = l.kind))
                OR least(l.rate_limit::double precision,
                         l.tokens + l.rate_limit * date_part('epoch', now() - l.refilled_at)
                                    / date_part('epoch', l.rate_period)) < 1);
        -- Keys at their kind's max_running_per_key: their leases still held, counted as above.
        full_pairs := ARRAY(
            SELECT s.kind || ' ' || s.concurrency_key
              FROM jobs.live_slot AS s
              JOIN jobs.kind_limit AS l ON l.kind = s.kind
             WHERE l.max_running_per_key IS NOT NULL AND s.concurrency_key IS NOT NULL
             GROUP BY s.kind, s.concurrency_key, l.max_running_per_key
            HAVING count(*) >= l.max_running_per_key);
    END IF;
    -- Per queue, then the overall oldest win; rows locked but not picked are released
    -- when this transaction ends. status = 'queued' repeats the view's rule so the
    -- partial index can serve the scan.
    FOR queue_name IN SELECT DISTINCT q.name FROM unnest(claim_next.queues) AS q(name)
                       WHERE q.name IS NOT NULL AND q.name <> ALL (paused) LOOP
        IF NOT EXISTS (SELECT 1 FROM jobs.job AS k
                        WHERE k.status = 'queued' AND k.queue = queue_name AND k.concurrency_key IS NOT NULL) THEN
            -- No keyed job waits here (one probe of an empty index range): the plain order.
            SELECT array_agg(c.id), array_agg(c.priority), array_agg(c.run_after)
              INTO found_ids, found_priorities, found_due
              FROM (SELECT q.id, q.priority, q.run_after FROM jobs.claimable AS q
                     WHERE q.status = 'queued' AND q.queue = queue_name AND q.kind <> ALL (full_kinds)
                     ORDER BY q.priority, q.run_after, q.id
                     LIMIT max_jobs
                     FOR UPDATE SKIP LOCKED) AS c;
            found_rounds := array_fill(1::bigint, ARRAY[coalesce(cardinality(found_ids), 0)]);
        ELSE
            -- Fair claiming (docs/sql-api.md, "Per-key concurrency and fair claiming"): the
            -- queue's keys take turns, so a key with a large backlog cannot starve one with
            -- a few jobs. The keys are read one index step each (a loose scan of
            -- job_queued_by_key_idx); those whose most urgent job is of a kind at its limit
            -- for the key sit this call out; of the rest, the max_jobs keys whose most
            -- urgent jobs waited longest each take an equal share, the jobs without a key
            -- one more. Round 1 is every key's first job, round 2 its second...
            turn_keys := ARRAY(
                WITH RECURSIVE k(key) AS (
                    (SELECT j.concurrency_key FROM jobs.job AS j
                      WHERE j.status = 'queued' AND j.queue = queue_name AND j.concurrency_key IS NOT NULL
                      ORDER BY j.concurrency_key LIMIT 1)
                    UNION ALL
                    SELECT (SELECT j.concurrency_key FROM jobs.job AS j
                             WHERE j.status = 'queued' AND j.queue = queue_name AND j.concurrency_key > k.key
                             ORDER BY j.concurrency_key LIMIT 1)
                      FROM k WHERE k.key IS NOT NULL)
                SELECT k.key
                  FROM k
                 CROSS JOIN LATERAL (SELECT h.kind, h.priority, h.run_after, h.id FROM jobs.job AS h
                                      WHERE h.status = 'queued' AND h.queue = queue_name AND h.concurrency_key = k.key
                                      -- The key index's own order (its first two columns fixed
                                      -- here), so that no plan walks the queue's whole backlog.
                                      ORDER BY h.queue, h.concurrency_key, h.priority, h.run_after, h.id LIMIT 1) AS head
                 WHERE k.key IS NOT NULL AND head.kind || ' ' || k.key <> ALL (full_pairs)
                 ORDER BY head.priority, head.run_after, head.id
                 LIMIT max_jobs);
            -- The jobs without a key take one turn more than the keys have: looked for among
            -- the first 1000 queued jobs of the queue, so a keyed backlog ahead of them costs
            -- a bounded walk.
            SELECT array_agg(u.id), array_agg(u.priority), array_agg(u.run_after), array_agg(u.round)
              INTO found_ids, found_priorities, found_due, found_rounds
              FROM (SELECT l.id, l.priority, l.run_after,
                           row_number() OVER (ORDER BY l.priority, l.run_after, l.id) AS round
                      FROM (SELECT q.id, q.priority, q.run_after FROM jobs.claimable AS q
                             WHERE q.id = ANY (ARRAY(SELECT w.id FROM jobs.job AS w
                                                      WHERE w.status = 'queued' AND w.queue = queue_name
                                                      ORDER BY w.priority, w.run_after, w.id LIMIT 1000))
                               AND q.concurrency_key IS NULL AND q.kind <> ALL (full_kinds)
                             ORDER BY q.priority, q.run_after, q.id
                             LIMIT ceil(max_jobs::numeric / (cardinality(turn_keys) + 1))
                               FOR UPDATE SKIP LOCKED) AS l) AS u;
            -- What the jobs without a key left of max_jobs, shared among the keys.
            share := ceil((max_jobs - coalesce(cardinality(found_ids), 0))::numeric / greatest(cardinality(turn_keys), 1));
            SELECT coalesce(found_ids, '{}') || coalesce(array_agg(c.id), '{}'),
                   coalesce(found_priorities, '{}') || coalesce(array_agg(c.priority), '{}'),
                   coalesce(found_due, '{}') || coalesce(array_agg(c.run_after), '{}'),
                   coalesce(found_rounds, '{}') || coalesce(array_agg(c.round), '{}')
              INTO found_ids, found_priorities, found_due, found_rounds
              FROM (SELECT q.id, q.priority, q.run_after, q.round
                      FROM unnest(turn_keys) AS t(key)
                     CROSS JOIN LATERAL (
                           SELECT l.id, l.priority, l.run_after,
                                  row_number() OVER (ORDER BY l.priority, l.run_after, l.id) AS round
                             FROM (SELECT q.id, q.priority, q.run_after FROM jobs.claimable AS q
                                    WHERE q.status = 'queued' AND q.queue = queue_name AND q.concurrency_key = t.key
                                      AND q.kind <> ALL (full_kinds)
                                    ORDER BY q.queue, q.concurrency_key, q.priority, q.run_after, q.id
                                    LIMIT share
                                      FOR UPDATE SKIP LOCKED) AS l) AS q) AS c;
        END IF;
        candidates := candidates || coalesce(found_ids, '{}');
        candidate_priorities := candidate_priorities || coalesce(found_priorities, '{}');
        candidate_due := candidate_due || coalesce(found_due, '{}');
        candidate_rounds := candidate_rounds || coalesce(found_rounds, '{}');
    END LOOP;
    -- The queues' candidates merged by round (a key's first job before any key's second),
    -- then by the same order, from the values just read: no second
    -- read of the rows, whose plan (cached for the session) could be a scan of the table.
    picked := ARRAY(SELECT u.id FROM unnest(candidates, candidate_priorities, candidate_due, candidate_rounds)
                                       AS u(id, priority, due, round)
                     ORDER BY u.round, u.priority, u.due, u.id
                     LIMIT max_jobs);
    RETURN QUERY SELECT * FROM jobs.grant_leases(picked, worker, rows_locked => true);
END $$;
COMMENT ON FUNCTION jobs.claim_next(text, text[], integer) IS
    'Claim up to max_jobs claimable jobs from the given queues (all when NULL), lowest priority value then oldest due first, without Redis: SKIP LOCKED polling; in a queue holding jobs with a concurrency_key, the keys take turns (fair claiming). Paused queues, kinds at their global limit and keys at their kind''s max_running_per_key are passed over.';
REVOKE ALL ON FUNCTION jobs.claim_next(text, text[], integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jobs.claim_next(text, text[], integer) TO jobs_worker, jobs_admin;
COMMIT;
