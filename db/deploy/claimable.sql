-- Deploy jobfence:claimable to pg
-- requires: job
BEGIN;
-- The one definition of "claimable" (DESIGN §4). A view, not a function, so the planner
-- inlines it into every claim path and uses the partial indexes; callers lock through it
-- with FOR UPDATE [SKIP LOCKED], which re-checks these conditions on the newest row version.
CREATE VIEW jobs.claimable AS
SELECT j.*
  FROM jobs.job AS j
 WHERE j.status = 'queued'
   AND j.run_after <= now()
   AND j.pending_children = 0
   AND (j.ordering_key IS NULL OR NOT EXISTS (
           SELECT 1
             FROM jobs.job AS older
            WHERE older.ordering_key = j.ordering_key
              AND older.id < j.id
              AND older.status IN ('queued', 'processing', 'enqueue_failed')));
COMMENT ON VIEW jobs.claimable IS
    'Jobs a worker may claim now: queued, due, no pending children, no older unfinished job with the same ordering_key. Private.';
REVOKE ALL ON jobs.claimable FROM PUBLIC;
COMMIT;
