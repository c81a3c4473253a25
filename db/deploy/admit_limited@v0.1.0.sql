-- Deploy jobfence:admit_limited to pg
-- requires: kind_limit
-- requires: queue_pause
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
    -- Slots of leases that ended (done, failed, reaped, cancelled, claimed anew) free up here,
    -- so the exits from processing need no bookkeeping. A scalar subquery, not NOT EXISTS:
    -- the planner cannot turn it into a hash anti-join over the whole job table, so each
    -- slot costs one primary-key probe ("IS NOT DISTINCT FROM": never a partial index).
    DELETE FROM jobs.kind_slot AS s
     WHERE s.kind = ANY (gated)
       AND (SELECT j.lease_version FROM jobs.job AS j
             WHERE j.id = s.job_id AND j.status IS NOT DISTINCT FROM 'processing') IS DISTINCT FROM s.lease_version;

    WITH room AS (
        SELECT l.kind, l.max_running, l.rate_limit,
               least(l.rate_limit::double precision,
                     l.tokens + l.rate_limit * date_part('epoch', now() - l.refilled_at)
                                / date_part('epoch', l.rate_period)) AS tokens,
               (SELECT count(*) FROM jobs.kind_slot AS s WHERE s.kind = l.kind) AS running
          FROM jobs.kind_limit AS l
         WHERE l.kind = ANY (gated)
    ), free AS (
        SELECT r.kind, r.max_running, r.tokens,
               least(coalesce(r.max_running - r.running, 2147483647),
                     coalesce(floor(r.tokens)::bigint, 2147483647)) AS n
          FROM room AS r
    ), candidates AS (
        -- Most urgent first when a batch holds more of a kind than it has room for.
        SELECT c.id, c.kind, c.lease_version,
               row_number() OVER (PARTITION BY c.kind ORDER BY c.priority, c.id) AS rank
          FROM jobs.claimable AS c
         WHERE c.id = ANY (job_ids) AND c.kind = ANY (gated) AND c.queue <> ALL (paused)
    ), picked AS (
        SELECT c.id, c.kind, c.lease_version
          FROM candidates AS c
          JOIN free AS f ON f.kind = c.kind
         WHERE c.rank <= f.n
    ), slots AS (
        -- The lease the grant is about to hand out: lease_version + 1.
        INSERT INTO jobs.kind_slot (kind, job_id, lease_version)
        SELECT p.kind, p.id, p.lease_version + 1
          FROM picked AS p
          JOIN free AS f ON f.kind = p.kind
         WHERE f.max_running IS NOT NULL
        ON CONFLICT ON CONSTRAINT kind_slot_pkey DO UPDATE SET lease_version = excluded.lease_version
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
    'Internal: of job_ids, those the global limits let through now (skip_busy: a kind whose row another claim holds lets none through) (ids of unlimited kinds pass; limited kinds get at most max_running minus running and the tokens in their bucket), recording their slots and spending tokens under the kinds'' row locks. Not granted to any role.';
REVOKE ALL ON FUNCTION jobs.admit_limited(bigint[], text[], text[], boolean) FROM PUBLIC;
COMMIT;
