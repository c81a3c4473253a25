-- Deploy jobfence:event to pg
-- requires: job
BEGIN;
-- Partitioned by day of `at` (UTC): retention drops a whole day's partition, a catalog change,
-- instead of deleting its rows one by one and leaving them for vacuum (docs/operations.md
-- "History partitions"). A day because retention is counted in days, a week of history is
-- about ten partitions for jobs.events to probe, and a partition is created (ahead, by
-- jobs.create_event_partitions) once a day rather than every hour. `at` is the writing
-- transaction's now(), so one transaction's events share a partition.
CREATE TABLE jobs.event (
    -- Unique by construction (GENERATED ALWAYS), and never looked up alone: histories are
    -- read through event_job_idx. A primary-key index would be one more insert per
    -- transition into its right-most page, which every writing session contends for (and
    -- on a partitioned table it would have to include `at`).
    id            bigint GENERATED ALWAYS AS IDENTITY,
    -- No foreign key: every transition writes an event, and a per-row referential check
    -- would be one more lookup of the job just written. Only jobs.* functions write here,
    -- always for a job they hold; retention removes a job's history with its partitions.
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
        'exhausted', 'failed', 'cancel_requested', 'cancelled', 'replayed', 'snoozed', 'timed_out'))
) PARTITION BY RANGE (at);
COMMENT ON TABLE jobs.event IS
    'Append-only transition log: who moved which job from what to what, when, at which lease_version, and why. One partition per UTC day (jobs.event_YYYYMMDD) plus jobs.event_default.';
REVOKE ALL ON jobs.event FROM PUBLIC;
-- Partitioned: each partition gets its own (job_id, id) index, so a job's history is one
-- index probe per partition, never a scan of a partition's heap.
CREATE INDEX event_job_idx ON jobs.event (job_id, id);
-- Catches what no day partition covers, so a transition never fails because the reaper has
-- not created the day's partition yet. Normally empty: jobs.prune deletes a pruned job's
-- rows here one by one, since this partition is never dropped.
CREATE TABLE jobs.event_default PARTITION OF jobs.event DEFAULT;
COMMENT ON TABLE jobs.event_default IS
    'Events no day partition covers (the reaper was late creating it). Never dropped: jobs.prune deletes the rows of the jobs it prunes.';
REVOKE ALL ON jobs.event_default FROM PUBLIC;
-- jobs.create_event_partitions asks whether a day already has rows here before creating its
-- partition: an index probe, not a scan, even when an outage filled this partition.
CREATE INDEX event_default_at_idx ON jobs.event_default (at);
COMMIT;
