-- Deploy jobfence:job to pg
-- requires: job_type
-- requires: status
BEGIN;
CREATE TABLE jobs.job (
    id                  bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    -- No foreign key to jobs.job_type: insert_jobs reads the kind's definition anyway (JB005
    -- when missing) and kinds are never deleted, so a per-row check would only cost time.
    kind                text NOT NULL,
    queue               text NOT NULL,
    payload             jsonb NOT NULL DEFAULT '{}',
    status              jobs.status NOT NULL DEFAULT 'queued',
    result              jsonb,
    error               text,
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now(),
    claimed_at          timestamptz,
    finished_at         timestamptz,
    owned_by            text,
    -- The session role (session_user) that claimed the current lease: the writes that follow
    -- must come from it (jobs.settings.bind_session_role). An oid, 4 bytes on the hot row.
    claim_role          regrole,
    lease_version       bigint NOT NULL DEFAULT 0,
    retry_count         integer NOT NULL DEFAULT 0,
    max_retries         integer NOT NULL,
    -- Copied from the kind at submit so a changed definition applies to new jobs only.
    lease_timeout       interval NOT NULL,
    timeout             interval NOT NULL,
    run_after           timestamptz NOT NULL DEFAULT now(),
    -- When the job first became due: its submission, or the run_after it was submitted with.
    -- Queue wait and latency SLOs count from here (docs/observability.md), so a job
    -- scheduled for tomorrow is not a latency miss tomorrow; run_after moves with retries.
    due_at              timestamptz NOT NULL DEFAULT now(),
    lease_expires_at    timestamptz,
    idempotency_key     text,
    ordering_key        text,
    -- A pruned coordinator must not take its (terminal) children's history with it.
    parent_id           bigint REFERENCES jobs.job (id) ON DELETE SET NULL,
    pending_children    integer NOT NULL DEFAULT 0,
    cancel_requested_at timestamptz,
    -- 0..9, lower runs first: claim_next's order and the Redis band of the job's signal.
    priority            smallint NOT NULL DEFAULT 0,
    -- What the handler last said of its own progress (jobs.progress), and when; readable
    -- through jobs.get. Kept after the job ends, so a result page can show the last step.
    progress            jsonb,
    progress_at         timestamptz,
    -- Snoozes so far (jobs.snooze): they spend no retry budget, so they are counted apart
    -- and bounded by jobs.max_snoozes().
    snoozes             integer NOT NULL DEFAULT 0,
    -- The submitting login role: session_user, since current_user inside the SECURITY DEFINER
    -- functions is their owner. jobs.producer_policy can confine producers to their own jobs.
    submitted_by        regrole NOT NULL DEFAULT quote_ident(session_user)::regrole,
    -- Whose namespace idempotency_key is in: NULL, one namespace shared by every producer
    -- (ownership off, or a jobs_admin member); with producer ownership on, the submitting
    -- login role, so one tenant's key never hands it another tenant's job (jobs.key_owner).
    key_owner           regrole,
    CONSTRAINT job_lease_version_nonnegative CHECK (lease_version >= 0),
    CONSTRAINT job_retry_count_nonnegative CHECK (retry_count >= 0),
    CONSTRAINT job_pending_children_nonnegative CHECK (pending_children >= 0),
    CONSTRAINT job_priority_range CHECK (priority BETWEEN 0 AND 9),
    CONSTRAINT job_snoozes_nonnegative CHECK (snoozes >= 0),
    CONSTRAINT job_processing_has_owner CHECK (
        status <> 'processing' OR (owned_by IS NOT NULL AND claimed_at IS NOT NULL AND lease_expires_at IS NOT NULL)),
    CONSTRAINT job_terminal_has_finished_at CHECK (
        (status IN ('done', 'failed')) = (finished_at IS NOT NULL))
);
COMMENT ON TABLE jobs.job IS 'One row per job: the single source of truth. Written only by jobs.* functions.';
REVOKE ALL ON jobs.job FROM PUBLIC;

-- Hot paths, each served by a partial index so millions of terminal rows are never scanned.
-- claim_next and stale_queued: due jobs of one queue, most urgent then oldest due first
-- (claim_next over every queue reads each queue in turn); jobs.queues skips along it from
-- queue to queue.
CREATE INDEX job_queued_by_queue_idx ON jobs.job (queue, priority, run_after, id) WHERE status = 'queued';
-- reap: expired leases.
CREATE INDEX job_lease_expiry_idx ON jobs.job (lease_expires_at) WHERE status = 'processing';
-- recover_enqueue_failed.
CREATE INDEX job_enqueue_failed_idx ON jobs.job (id) WHERE status = 'enqueue_failed';
-- list_jobs(status => 'failed'): the dead letters, newest first, however many jobs are done.
CREATE INDEX job_failed_idx ON jobs.job (id) WHERE status = 'failed';
-- reap: queued jobs whose budget is already spent (normally none, so the index stays empty).
CREATE INDEX job_overspent_idx ON jobs.job (id)
    WHERE status IN ('queued', 'enqueue_failed') AND retry_count > max_retries;
-- Ordering: is there an older unfinished job with the same key?
CREATE INDEX job_ordering_idx ON jobs.job (ordering_key, id)
    WHERE ordering_key IS NOT NULL AND status IN ('queued', 'processing', 'enqueue_failed');
-- ...and is a younger one of the key running (only after a replay)? Few rows: the running ones.
CREATE INDEX job_ordering_running_idx ON jobs.job (ordering_key)
    WHERE ordering_key IS NOT NULL AND status = 'processing';
-- list_jobs(ordering_key => ...): one key's jobs of every status, newest first (the index
-- above holds only the unfinished ones). Only jobs with a key pay for it.
CREATE INDEX job_ordering_key_idx ON jobs.job (ordering_key, id) WHERE ordering_key IS NOT NULL;
-- Fan-in: a coordinator's children.
CREATE INDEX job_parent_idx ON jobs.job (parent_id) WHERE parent_id IS NOT NULL;
-- prune: terminal jobs by age.
CREATE INDEX job_finished_idx ON jobs.job (finished_at) WHERE status IN ('done', 'failed');
-- Idempotency keys are unique per kind and key namespace (NULLS NOT DISTINCT: the shared
-- namespace, NULL, is one namespace).
CREATE UNIQUE INDEX job_idempotency_key_idx ON jobs.job (kind, idempotency_key, key_owner) NULLS NOT DISTINCT
    WHERE idempotency_key IS NOT NULL;
COMMIT;
