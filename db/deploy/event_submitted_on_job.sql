-- Deploy jobfence:event_submitted_on_job to pg
-- requires: event_reason_dependencies
-- requires: job
BEGIN;
-- A job's submitted transition (new -> queued, lease_version 0) is its row: the job row
-- already holds when (created_at, the submitting transaction's now()) and who
-- (submitted_by, its session role), and nothing else in that transition varies. Writing it
-- again as a jobs.event row was a fifth of a submit's server work (docs/performance.md
-- "The submitted transition is the job row"). jobs.history reads it from the row
-- (docs/design.md "What is recorded where").
--
-- The rows written before this change say nothing the job rows do not, so they go: one
-- truth per transition, and no job read with two submissions. The check below then
-- refuses a new one, so no writer can record it twice.
--
-- The DELETE first, under the lock every writer takes (the history's other writers carry
-- on meanwhile); then the check, whose exclusive lock is held only from here to the commit.
-- NOT VALID: the DELETE left no row it refuses (insert_jobs, earlier in the plan, writes
-- none), so a scan of every partition under that lock would only check it again.
DELETE FROM jobs.event WHERE reason = 'submitted';
ALTER TABLE jobs.event DROP CONSTRAINT event_reason_known;
ALTER TABLE jobs.event ADD CONSTRAINT event_reason_known CHECK (reason IN (
    'enqueue_failed', 'recovered', 'claimed', 'completed', 'retried', 'reaped',
    'exhausted', 'failed', 'cancel_requested', 'cancelled', 'replayed', 'snoozed', 'timed_out',
    'debounced', 'released', 'dependency_failed')) NOT VALID;
COMMENT ON TABLE jobs.event IS
    'Append-only transition log: who moved which job from what to what, when, at which lease_version, and why; every transition but the submission, which is the job row (jobs.history reads both). One partition per UTC day (jobs.event_YYYYMMDD) plus jobs.event_default.';
COMMIT;
