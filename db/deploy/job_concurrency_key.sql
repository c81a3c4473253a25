-- Deploy jobfence:job_concurrency_key to pg
-- requires: job
BEGIN;
-- The key a job's kind may bound the running jobs of (docs/sql-api.md, "Per-key concurrency
-- and fair claiming"): a tenant, a customer, an account. Written once, at submit.
ALTER TABLE jobs.job
    ADD COLUMN concurrency_key text,
    -- NOT VALID: the column is new and NULL everywhere, so there is nothing to scan; the
    -- check still holds every row written from now on. insert_jobs refuses a bad key with
    -- a friendlier 22023 first.
    ADD CONSTRAINT job_concurrency_key_length CHECK (length(concurrency_key) BETWEEN 1 AND 200) NOT VALID;
COMMENT ON COLUMN jobs.job.concurrency_key IS
    'The key the kind''s max_running_per_key counts running jobs by, and jobs.claim_next takes turns between (NULL: none).';
-- The keyed backlog of a queue, for jobs.claim_next's turns between keys: the queue's keys
-- one index step each, then each key's most urgent jobs. Partial: jobs without a key, and
-- every job once it left queued, are no entry here, so unkeyed submits pay nothing for it.
CREATE INDEX job_queued_by_key_idx ON jobs.job (queue, concurrency_key, priority, run_after, id)
 WHERE status = 'queued' AND concurrency_key IS NOT NULL;
COMMIT;
