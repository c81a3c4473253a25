-- Deploy jobfence:signal to pg
-- requires: jobs
BEGIN;
CREATE TYPE jobs.signal AS (
    job_id    bigint,
    queue     text,
    run_after timestamptz
);
COMMENT ON TYPE jobs.signal IS 'A job id to push to Redis: onto the ready list of queue, or the delayed set when run_after is in the future.';
COMMIT;
