-- Revert jobfence:claimable from pg: back to the body released in v0.1.0
BEGIN;
-- Dropped and created again with the released columns named one by one: j.* would take in
-- the columns added since, which are dropped after this (the view would hold them).
DROP VIEW jobs.claimable;
CREATE VIEW jobs.claimable AS
SELECT j.id, j.kind, j.queue, j.payload, j.status, j.result, j.error, j.created_at, j.updated_at, j.claimed_at, j.finished_at, j.owned_by, j.claim_role, j.lease_version, j.retry_count, j.max_retries, j.lease_timeout, j.timeout, j.run_after, j.due_at, j.lease_expires_at, j.idempotency_key, j.ordering_key, j.parent_id, j.pending_children, j.cancel_requested_at, j.priority, j.progress, j.progress_at, j.snoozes, j.submitted_by, j.key_owner
  FROM jobs.job AS j
 WHERE j.status IS NOT DISTINCT FROM 'queued'
   AND j.run_after <= now()
   AND j.pending_children = 0
   -- One job of a key at a time, in id order: no older unfinished job of the key, and no
   -- younger one running either (only a replay can put an older job back behind a running
   -- younger one: it then waits for that one to end).
   -- Two probes, each on its own index: the older ones through job_ordering_idx (a range
   -- below the id), the running younger one through job_ordering_running_idx (a handful of
   -- rows), so a long line of one key is never walked per claim.
   AND (j.ordering_key IS NULL OR (
           NOT EXISTS (
               SELECT 1
                 FROM jobs.job AS older
                WHERE older.ordering_key = j.ordering_key
                  AND older.id < j.id
                  AND older.status IN ('queued', 'processing', 'enqueue_failed'))
           AND NOT EXISTS (
               SELECT 1
                 FROM jobs.job AS running
                WHERE running.ordering_key = j.ordering_key
                  AND running.status = 'processing'
                  AND running.id > j.id)));
COMMENT ON VIEW jobs.claimable IS
    'Jobs a worker may claim now: queued, due, no pending children, no older unfinished job and no running job with the same ordering_key. Private.';
REVOKE ALL ON jobs.claimable FROM PUBLIC;
COMMIT;
