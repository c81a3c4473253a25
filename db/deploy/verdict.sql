-- Deploy jobfence:verdict to pg
-- requires: jobs
BEGIN;
-- How a lease ends, as its caller says it (docs/sql-api.md, "Leaving processing: one door"):
-- a typed input, so a misspelt verdict is an error where it is written, not a retry.
CREATE TYPE jobs.verdict AS ENUM ('done', 'retry', 'fatal', 'snooze', 'expired', 'timeout');
COMMENT ON TYPE jobs.verdict IS
    'How a lease ends, the input of the internal finish_leases: done (complete), retry or fatal (fail, retryable or not), snooze, and the reaper''s expired (heartbeats stopped) and timeout (execution timeout reached), the only two that skip the role and token checks, and only for jobs.reap.';
COMMIT;
