-- Deploy jobfence:heartbeat_type to pg
-- requires: jobs
BEGIN;
CREATE TYPE jobs.heartbeat AS (
    alive            boolean,
    cancel_requested boolean,
    lease_expires_at timestamptz
);
COMMENT ON TYPE jobs.heartbeat IS 'Heartbeat answer. alive = false: the execution timeout is reached; stop and fail with error timeout.';
COMMIT;
