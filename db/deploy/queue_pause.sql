-- Deploy jobfence:queue_pause to pg
-- requires: jobs
BEGIN;
-- The paused queues: a row here makes a queue's jobs unclaimable (jobs.grant_leases,
-- jobs.claim_next) and unswept (jobs.stale_queued) until jobs.resume deletes it. Claims read
-- the whole table once per call, so it stays as small as the number of paused queues.
CREATE TABLE jobs.queue_pause (
    queue      text PRIMARY KEY,
    paused_at  timestamptz NOT NULL DEFAULT now(),
    paused_by  regrole NOT NULL DEFAULT quote_ident(session_user)::regrole
);
COMMENT ON TABLE jobs.queue_pause IS
    'Queues paused now (jobs.pause / jobs.resume): their jobs are not claimed. Private.';
REVOKE ALL ON jobs.queue_pause FROM PUBLIC;

-- Every pause and resume that changed something, for the audit trail: job events are per
-- job, and a pause touches none.
CREATE TABLE jobs.queue_pause_log (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    queue      text NOT NULL,
    action     text NOT NULL CONSTRAINT queue_pause_log_action CHECK (action IN ('paused', 'resumed')),
    at         timestamptz NOT NULL DEFAULT now(),
    by_role    regrole NOT NULL DEFAULT quote_ident(session_user)::regrole
);
COMMENT ON TABLE jobs.queue_pause_log IS
    'Append-only history of jobs.pause and jobs.resume calls that changed a queue''s state (who, when). Private: read it as the schema owner.';
REVOKE ALL ON jobs.queue_pause_log FROM PUBLIC;
CREATE INDEX queue_pause_log_queue_idx ON jobs.queue_pause_log (queue, id);
COMMIT;
