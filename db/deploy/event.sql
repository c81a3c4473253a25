-- Deploy jobfence:event to pg
-- requires: job
BEGIN;
CREATE TABLE jobs.event (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    -- Pruning a job removes its history with it.
    job_id        bigint NOT NULL REFERENCES jobs.job (id) ON DELETE CASCADE,
    at            timestamptz NOT NULL DEFAULT now(),
    from_status   jobs.status,
    to_status     jobs.status NOT NULL,
    lease_version bigint NOT NULL,
    worker        text,
    reason        text NOT NULL,
    error         text,
    CONSTRAINT event_reason_known CHECK (reason IN (
        'submitted', 'enqueue_failed', 'recovered', 'claimed', 'completed', 'retried', 'reaped',
        'exhausted', 'failed', 'cancel_requested', 'cancelled', 'replayed'))
);
COMMENT ON TABLE jobs.event IS
    'Append-only transition log: who moved which job from what to what, when, at which lease_version, and why.';
REVOKE ALL ON jobs.event FROM PUBLIC;
CREATE INDEX event_job_idx ON jobs.event (job_id, id);
COMMIT;
