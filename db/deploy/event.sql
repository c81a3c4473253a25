-- Deploy jobfence:event to pg
-- requires: job
BEGIN;
CREATE TABLE jobs.event (
    -- Unique by construction (GENERATED ALWAYS), and never looked up alone: histories are
    -- read through event_job_idx. A primary-key index would be one more insert per
    -- transition into its right-most page, which every writing session contends for.
    id            bigint GENERATED ALWAYS AS IDENTITY,
    -- No foreign key: every transition writes an event, and a per-row referential check
    -- would be one more lookup of the job just written. Only jobs.* functions write here,
    -- always for a job they hold; jobs.prune deletes a job's events with it.
    job_id        bigint NOT NULL,
    at            timestamptz NOT NULL DEFAULT now(),
    from_status   jobs.status,
    to_status     jobs.status NOT NULL,
    lease_version bigint NOT NULL,
    worker        text,
    -- Who acted: the session role (session_user) of the transaction that wrote the event,
    -- whatever worker name it claimed to be. A default, so every writer records it.
    session_role  regrole DEFAULT to_regrole(quote_ident(session_user)),
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
