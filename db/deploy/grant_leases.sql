-- Deploy jobfence:grant_leases to pg
-- requires: claimable
-- requires: event
-- requires: lease
BEGIN;
-- The queued -> processing transition shared by claim, claim_many and claim_next. Callers
-- pick and lock the ids through jobs.claimable first; the status guard here is a second line.
CREATE OR REPLACE FUNCTION jobs.grant_leases(job_ids bigint[], worker text)
RETURNS SETOF jobs.lease
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
    -- PL/pgSQL rather than SQL: it caches the plan; a non-inlinable SQL function re-plans every call.
    RETURN QUERY
    WITH claimed AS (
        UPDATE jobs.job AS j
           SET status = 'processing',
               owned_by = grant_leases.worker,
               lease_version = j.lease_version + 1,
               claimed_at = now(),
               lease_expires_at = now() + least(j.lease_timeout, j.timeout),
               updated_at = now()
          -- Joined to the ids rather than "id = ANY": the planner then looks each id up in
          -- the primary key instead of walking a partial index of every queued job.
          FROM unnest(grant_leases.job_ids) AS u(id)
         WHERE j.id = u.id
           AND j.status = 'queued'
        RETURNING j.*
    ), logged AS (
        INSERT INTO jobs.event (job_id, at, from_status, to_status, lease_version, worker, reason)
        SELECT c.id, now(), 'queued', 'processing', c.lease_version, c.owned_by, 'claimed'
          FROM claimed AS c
    )
    SELECT c.id, c.lease_version, c.kind, c.queue, c.payload, c.retry_count + 1,
           c.lease_expires_at, c.claimed_at + c.timeout
      FROM claimed AS c
     ORDER BY c.id;
END $$;
COMMENT ON FUNCTION jobs.grant_leases(bigint[], text) IS
    'Internal: move already-locked queued jobs to processing for worker and log the claim. Not granted to any role.';
REVOKE ALL ON FUNCTION jobs.grant_leases(bigint[], text) FROM PUBLIC;
COMMIT;
