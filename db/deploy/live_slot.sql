-- Deploy jobfence:live_slot to pg
-- requires: kind_limit_per_key
-- requires: job
BEGIN;
-- The one rule for which slots of jobs.kind_slot still count against a kind's limits
-- (max_running, max_running_per_key): a slot counts while its job is processing under the
-- lease it was recorded for. A slot whose lease ended (done, failed, reaped, cancelled, or
-- claimed anew) is free, so the exits from processing need no bookkeeping.
-- jobs.admit_limited prunes the other slots and jobs.claim_next reads these. A scalar
-- subquery per slot, not a join: the planner cannot turn it into a hash join over the whole
-- job table, so each slot costs one primary-key probe ("IS NOT DISTINCT FROM": never a
-- partial index).
CREATE VIEW jobs.live_slot AS
SELECT s.kind, s.job_id, s.lease_version, s.concurrency_key
  FROM jobs.kind_slot AS s
 WHERE (SELECT j.lease_version FROM jobs.job AS j
         WHERE j.id = s.job_id AND j.status IS NOT DISTINCT FROM 'processing') = s.lease_version;
COMMENT ON VIEW jobs.live_slot IS
    'The slots of jobs.kind_slot that still count against their kind''s limits: those whose job is processing under the lease_version the slot was recorded for.';
REVOKE ALL ON jobs.live_slot FROM PUBLIC;
COMMIT;
