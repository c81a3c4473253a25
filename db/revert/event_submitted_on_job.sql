-- Revert jobfence:event_submitted_on_job from pg
-- The submitted transitions go back into jobs.event, one per job row, as the functions of
-- the changes before this one read them. Their ids are the jobs' ids negated: below every
-- id the identity hands out, so each sorts first in its job's history, as it was written.
BEGIN;
ALTER TABLE jobs.event DROP CONSTRAINT event_reason_known;
ALTER TABLE jobs.event ADD CONSTRAINT event_reason_known CHECK (reason IN (
    'submitted', 'enqueue_failed', 'recovered', 'claimed', 'completed', 'retried', 'reaped',
    'exhausted', 'failed', 'cancel_requested', 'cancelled', 'replayed', 'snoozed', 'timed_out',
    'debounced', 'released', 'dependency_failed'));
INSERT INTO jobs.event (id, job_id, at, from_status, to_status, lease_version, session_role, reason)
OVERRIDING SYSTEM VALUE
SELECT -j.id, j.id, j.created_at, NULL, 'queued', 0, j.submitted_by, 'submitted' FROM jobs.job AS j;
COMMENT ON TABLE jobs.event IS
    'Append-only transition log: who moved which job from what to what, when, at which lease_version, and why. One partition per UTC day (jobs.event_YYYYMMDD) plus jobs.event_default.';
COMMIT;
