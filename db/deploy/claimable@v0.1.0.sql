-- Deploy jobfence:claimable to pg
-- requires: job
BEGIN;
-- The one definition of "claimable" (docs/design.md §4). A view, not a function, so the planner
-- inlines it into every claim path; callers lock or update through it, which re-checks these
-- conditions on the newest row version after a lock wait.
-- "IS NOT DISTINCT FROM" (the same as "=" on this NOT NULL column) on purpose: it does not
-- prove the predicate of the partial indexes on queued jobs, so a lookup by id always uses
-- the primary key. With "=", a table whose statistics say "few queued jobs" (a new table, or
-- one full of dead index entries) led the planner to walk a whole partial index per id.
-- Scans that want those indexes (claim_next, stale_queued) add "status = 'queued'" themselves.
CREATE VIEW jobs.claimable AS
SELECT j.*
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
