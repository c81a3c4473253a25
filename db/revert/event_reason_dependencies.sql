-- Revert jobfence:event_reason_dependencies from pg
-- Fails (23514) while the history holds a 'released' or 'dependency_failed' event.
BEGIN;
ALTER TABLE jobs.event DROP CONSTRAINT event_reason_known;
ALTER TABLE jobs.event ADD CONSTRAINT event_reason_known CHECK (reason IN (
    'submitted', 'enqueue_failed', 'recovered', 'claimed', 'completed', 'retried', 'reaped',
    'exhausted', 'failed', 'cancel_requested', 'cancelled', 'replayed', 'snoozed', 'timed_out',
    'debounced'));
COMMIT;
