-- Deploy jobfence:event_reason_dependencies to pg
-- requires: event_reason_debounced
BEGIN;
-- Dependencies (docs/sql-api.md "Dependencies") write two reasons: 'released' (queued ->
-- queued: the job's last unmet dependency ended, it may run now) and 'dependency_failed'
-- (queued -> failed: a dependency failed under the policy fail; the error names it).
-- The check is replaced, not added beside: one list of reasons.
ALTER TABLE jobs.event DROP CONSTRAINT event_reason_known;
ALTER TABLE jobs.event ADD CONSTRAINT event_reason_known CHECK (reason IN (
    'submitted', 'enqueue_failed', 'recovered', 'claimed', 'completed', 'retried', 'reaped',
    'exhausted', 'failed', 'cancel_requested', 'cancelled', 'replayed', 'snoozed', 'timed_out',
    'debounced', 'released', 'dependency_failed'));
COMMIT;
