-- Deploy jobfence:grant_leases to pg
-- requires: claimable
-- requires: event
-- requires: lease
-- requires: tally
-- requires: queue_pause
-- requires: admit_limited
BEGIN;
-- The queued -> processing transition shared by claim, claim_many and claim_next: the one
-- door into processing. Ids that are not claimable now are skipped (zero rows for them).
-- It writes no jobs.event row: the row it sets (claimed_at, owned_by, claim_role,
-- lease_version) is the record of the claim until something else about the lease is
-- recorded, which writes the claim's row first (finish_leases, cancel; docs/design.md "What
-- is recorded where").
-- queues: those of the caller's queues (NULL: any). A worker serves its queues only: an id
-- pushed into the wrong ready list (by anything with write access to Redis) is then a no-op
-- claim, not another queue's job run by a worker that has no handler for it.
-- rows_locked: the caller (claim_next) already holds locks on some of these rows; a claim
-- that holds job rows must not wait for a kind's row, which a claimer waiting for those job
-- rows may hold (see jobs.admit_limited).
CREATE OR REPLACE FUNCTION jobs.grant_leases(job_ids bigint[], worker text, rows_locked boolean DEFAULT false,
                                             queues text[] DEFAULT NULL)
RETURNS SETOF jobs.lease
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
SET enable_nestloop = off
AS $$
DECLARE
    -- Who claims: the session's login role, not the worker name it gives (any caller can
    -- give any name). Inside a SECURITY DEFINER function current_user is the owner.
    me regrole := quote_ident(session_user)::regrole;
    paused text[];
    limited text[];
BEGIN
    -- Paused queues and limited kinds: two tiny tables (usually empty) read once per call,
    -- never per row. With neither, the grant below is all there is.
    SELECT ARRAY(SELECT p.queue FROM jobs.queue_pause AS p), ARRAY(SELECT l.kind FROM jobs.kind_limit AS l)
      INTO paused, limited;
    IF cardinality(limited) > 0 THEN
        job_ids := jobs.admit_limited(job_ids, limited, paused, rows_locked);
    END IF;
    -- PL/pgSQL rather than SQL: it caches the plan; a non-inlinable SQL function re-plans every call.
    RETURN QUERY
    -- Through the view: the UPDATE itself locks each row and re-checks "claimable" on its
    -- newest version after a lock wait, so there is no separate lock pass and exactly one of
    -- N racing claims of a job wins. The plan is the same whatever the statistics (see
    -- docs/decisions.md, "planned the same on any table"): the rows are found through the
    -- primary key (id = ANY; a repeated id is one row) and visited in the same order by
    -- every caller, so overlapping batches cannot deadlock.
    WITH claimed AS (
        UPDATE jobs.claimable AS j
           SET status = 'processing',
               owned_by = grant_leases.worker,
               claim_role = me,
               lease_version = j.lease_version + 1,
               claimed_at = now(),
               lease_expires_at = now() + least(j.lease_timeout, j.timeout),
               updated_at = now()
         WHERE j.id = ANY (grant_leases.job_ids)
           -- A paused queue's job is refused like one not due yet: it stays queued.
           AND j.queue <> ALL (paused)
           AND (grant_leases.queues IS NULL OR j.queue = ANY (grant_leases.queues))
        -- Only what the CTEs below read: the whole row (37 columns) would be built into
        -- and read back from the CTE's store for every claimed job.
        RETURNING j.id, j.lease_version, j.kind, j.queue, j.payload, j.retry_count, j.owned_by,
                  j.claimed_at, j.lease_expires_at, j.timeout, j.due_at
    ), tallied AS (
        -- Queue wait is measured on a job's first claim (lease_version 1) only, from when it
        -- became due.
        SELECT jobs.tally(array_agg(c.kind), array_fill('claimed'::text, ARRAY[count(*)::integer]), NULL,
                          array_agg(CASE WHEN c.lease_version = 1 THEN date_part('epoch', now() - c.due_at) END)) AS n
          FROM claimed AS c
    )
    SELECT c.id, c.lease_version, c.kind, c.queue, c.payload, c.retry_count + 1,
           c.lease_expires_at, c.claimed_at + c.timeout
      FROM claimed AS c, tallied
     ORDER BY c.id;
END $$;
COMMENT ON FUNCTION jobs.grant_leases(bigint[], text, boolean, text[]) IS
    'Internal: move those of the given jobs that are claimable now (and in one of queues unless NULL, not in a paused queue, and within their kind''s global limits) to processing for worker (recording the session role as claim_role) and log the claims. Not granted to any role.';
REVOKE ALL ON FUNCTION jobs.grant_leases(bigint[], text, boolean, text[]) FROM PUBLIC;
COMMIT;
