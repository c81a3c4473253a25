-- Deploy jobfence:event_reason_debounced to pg
-- requires: event
BEGIN;
-- A debounced repeat (docs/sql-api.md, "Scoped keys and debounce") changes a queued job's
-- payload or run_after without moving it: the history records it as queued -> queued,
-- reason 'debounced', so every change a job's row went through has its event.
-- The check is replaced, not added beside: one list of reasons. Validating it reads the
-- history once, at deploy.
ALTER TABLE jobs.event DROP CONSTRAINT event_reason_known;
ALTER TABLE jobs.event ADD CONSTRAINT event_reason_known CHECK (reason IN (
    'submitted', 'enqueue_failed', 'recovered', 'claimed', 'completed', 'retried', 'reaped',
    'exhausted', 'failed', 'cancel_requested', 'cancelled', 'replayed', 'snoozed', 'timed_out',
    'debounced'));
COMMIT;
