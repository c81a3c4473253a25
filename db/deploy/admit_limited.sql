-- Deploy jobfence:admit_limited to pg
-- requires: kind_limit
-- requires: queue_pause
-- requires: claimable
-- requires: live_slot
-- requires: kind_limit_per_key
-- requires: job_concurrency_key
-- requires: claimable
BEGIN;
-- The global limits of docs/sql-api.md ("Global limits per kind"), applied where a claim is
-- granted so that no number of workers can exceed them. Called by jobs.grant_leases only when
-- some kind is limited. Planned the same on any table (enable_seqscan off, as grant_leases:
-- a session caches its first generic plan, and one made while the table was small would
-- scan it once it is large), but not enable_nestloop off: the slot checks are a handful of
-- primary-key probes, which a hash join would turn into scans.
CREATE OR REPLACE FUNCTION jobs.admit_limited(job_ids bigint[], limited text[], paused text[], skip_busy boolean)
RETURNS bigint[]
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
AS $$
DECLARE
    free_ids bigint[];
    gated text[];
    admitted bigint[];
BEGIN
    -- One primary-key read splits the batch: ids of unlimited kinds pass as they are.
    SELECT coalesce(array_agg(j.id) FILTER (WHERE j.kind <> ALL (limited)), '{}'),
           coalesce(array_agg(DISTINCT j.kind) FILTER (WHERE j.kind = ANY (limited)), '{}')
      INTO free_ids, gated
      FROM jobs.job AS j
     WHERE j.id = ANY (job_ids);
    IF cardinality(gated) = 0 THEN
        RETURN free_ids;
    END IF;

    -- Serialises the claimers of these kinds until this transaction ends. Kind order, so two
    -- batches sharing kinds wait for each other instead of deadlocking. Every statement below
    -- takes a snapshot after the lock, so it sees the slots and tokens of the claimer before.
    -- A caller already holding job rows (claim_next) must not wait here: the holder of a
    -- kind's row may be waiting for those very rows. It skips a busy kind instead (its ids
    -- are not granted this time; the rows are released when its transaction ends).
    IF skip_busy THEN
        gated := ARRAY(SELECT l.kind FROM jobs.kind_limit AS l WHERE l.kind = ANY (gated)
                        ORDER BY l.kind FOR UPDATE SKIP LOCKED);
    ELSE
        gated := ARRAY(SELECT l.kind FROM jobs.kind_limit AS l WHERE l.kind = ANY (gated)
                        ORDER BY l.kind FOR UPDATE);
    END IF;
    -- Slots of leases that ended (done, failed, reaped, cancelled, claimed anew) free up
    -- here: every slot of these kinds that jobs.live_slot does not count.
    DELETE FROM jobs.kind_slot AS s
     WHERE s.kind = ANY (gated)
       AND NOT EXISTS (SELECT 1 FROM jobs.live_slot AS l
                        WHERE l.kind = s.kind AND l.job_id = s.job_id AND l.lease_version = s.lease_version);

    WITH room AS (
        SELECT l.kind, l.max_running, l.rate_limit, l.max_running_per_key,
               least(l.rate_limit::double precision,
                     l.tokens + l.rate_limit * date_part('epoch', now() - l.refilled_at)
                                / date_part('epoch', l.rate_period)) AS tokens,
               (SELECT count(*) FROM jobs.kind_slot AS s WHERE s.kind = l.kind) AS running
          FROM jobs.kind_limit AS l
         WHERE l.kind = ANY (gated)
    ), free AS (
        SELECT r.kind, r.max_running, r.tokens, r.max_running_per_key,
               least(coalesce(r.max_running - r.running, 2147483647),
                     coalesce(floor(r.tokens)::bigint, 2147483647)) AS n
          FROM room AS r
    ), candidates AS (
        SELECT c.id, c.kind, c.lease_version, c.priority, c.concurrency_key
          FROM jobs.claimable AS c
         WHERE c.id = ANY (job_ids) AND c.kind = ANY (gated) AND c.queue <> ALL (paused)
    ), key_room AS (
        -- Per key (max_running_per_key): the leases its kind's jobs of that key still hold,
        -- one index range per key of the batch. A job without a key has no bound per key.
        SELECT k.kind, k.concurrency_key,
               f.max_running_per_key - (SELECT count(*) FROM jobs.kind_slot AS s
                                         WHERE s.kind = k.kind AND s.concurrency_key = k.concurrency_key) AS n
          FROM (SELECT DISTINCT c.kind, c.concurrency_key FROM candidates AS c WHERE c.concurrency_key IS NOT NULL) AS k
          JOIN free AS f ON f.kind = k.kind
         WHERE f.max_running_per_key IS NOT NULL
    ), within_key AS (
        -- Most urgent first when a batch holds more of a key than it has room for.
        SELECT c.id, c.kind, c.lease_version, c.priority, c.concurrency_key
          FROM (SELECT c.*, row_number() OVER (PARTITION BY c.kind, c.concurrency_key ORDER BY c.priority, c.id) AS key_rank
                  FROM candidates AS c) AS c
          LEFT JOIN key_room AS k ON k.kind = c.kind AND k.concurrency_key = c.concurrency_key
         WHERE k.n IS NULL OR c.key_rank <= k.n
    ), ranked AS (
        -- Most urgent first when a batch holds more of a kind than it has room for.
        SELECT w.id, w.kind, w.lease_version, w.concurrency_key,
               row_number() OVER (PARTITION BY w.kind ORDER BY w.priority, w.id) AS rank
          FROM within_key AS w
    ), picked AS (
        SELECT c.id, c.kind, c.lease_version, c.concurrency_key
          FROM ranked AS c
          JOIN free AS f ON f.kind = c.kind
         WHERE c.rank <= f.n
    ), slots AS (
        -- The lease the grant is about to hand out: lease_version + 1.
        -- A slot for each lease a bound counts: every one under max_running, a keyed one
        -- under max_running_per_key.
        INSERT INTO jobs.kind_slot (kind, job_id, lease_version, concurrency_key)
        SELECT p.kind, p.id, p.lease_version + 1, p.concurrency_key
          FROM picked AS p
          JOIN free AS f ON f.kind = p.kind
         WHERE f.max_running IS NOT NULL OR (f.max_running_per_key IS NOT NULL AND p.concurrency_key IS NOT NULL)
        ON CONFLICT ON CONSTRAINT kind_slot_pkey DO UPDATE
           SET lease_version = excluded.lease_version, concurrency_key = excluded.concurrency_key
    ), spent AS (
        -- Every gated row is written, even without a rate: under REPEATABLE READ a second
        -- claimer then fails (40001) instead of counting slots its snapshot cannot see.
        UPDATE jobs.kind_limit AS l
           SET tokens = CASE WHEN l.rate_limit IS NULL THEN l.tokens
                             ELSE f.tokens - (SELECT count(*) FROM picked AS p WHERE p.kind = f.kind) END,
               refilled_at = now()
          FROM free AS f
         WHERE l.kind = f.kind
    )
    SELECT coalesce(array_agg(p.id), '{}') INTO admitted FROM picked AS p;
    RETURN free_ids || admitted;
END $$;
COMMENT ON FUNCTION jobs.admit_limited(bigint[], text[], text[], boolean) IS
    'Internal: of job_ids, those the global limits let through now (skip_busy: a kind whose row another claim holds lets none through) (ids of unlimited kinds pass; limited kinds get at most max_running minus running, the tokens in their bucket, and per concurrency_key max_running_per_key minus the key''s running), recording their slots and spending tokens under the kinds'' row locks. Not granted to any role.';
REVOKE ALL ON FUNCTION jobs.admit_limited(bigint[], text[], text[], boolean) FROM PUBLIC;
COMMIT;
