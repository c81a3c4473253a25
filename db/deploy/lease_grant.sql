-- Deploy jobfence:lease_grant to pg
-- requires: jobs
BEGIN;
-- jobs.lease plus the lease token: a new type beside it, so jobs.lease and every function
-- returning it keep their documented shape.
CREATE TYPE jobs.lease_grant AS (
    job_id           bigint,
    lease_version    bigint,
    kind             text,
    queue            text,
    payload          jsonb,
    attempt          integer,
    lease_expires_at timestamptz,
    timeout_at       timestamptz,
    token            uuid
);
COMMENT ON TYPE jobs.lease_grant IS 'A granted lease with its lease token: (job_id, lease_version) fences it, token proves the caller was handed it. Returned by claim_with_token, claim_many_with_token and claim_next_with_token; give token to heartbeat, complete and fail.';
COMMIT;
