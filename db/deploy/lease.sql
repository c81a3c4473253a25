-- Deploy jobfence:lease to pg
-- requires: jobs
BEGIN;
CREATE TYPE jobs.lease AS (
    job_id           bigint,
    lease_version    bigint,
    kind             text,
    queue            text,
    payload          jsonb,
    attempt          integer,
    lease_expires_at timestamptz,
    timeout_at       timestamptz
);
COMMENT ON TYPE jobs.lease IS 'A granted lease: the fencing token (job_id, lease_version) a worker must present to heartbeat, complete or fail.';
COMMIT;
