-- Deploy jobfence:status to pg
-- requires: jobs
BEGIN;
CREATE TYPE jobs.status AS ENUM ('queued', 'processing', 'done', 'failed', 'enqueue_failed');
COMMENT ON TYPE jobs.status IS 'Job lifecycle state. Terminal: done, failed.';
COMMIT;
