-- Deploy jobfence:signal to pg
-- requires: jobs
BEGIN;
CREATE TYPE jobs.signal AS (
    job_id    bigint,
    queue     text,
    run_after timestamptz,
    -- The job's priority (0..9) names its band: which of the queue's ready lists (and
    -- delayed sets) the id goes to.
    priority  smallint
);
COMMENT ON TYPE jobs.signal IS 'A job id to push to Redis: onto the ready list of queue''s band priority, or that band''s delayed set when run_after is in the future.';
COMMIT;
