-- Verify jobfence:page on pg
SELECT id, job_id, kind, queue, error, reason, retry_count, max_retries, failed_at, created_at,
       attempts, due_at, last_attempt_at, last_error, delivered_at
  FROM jobs.page WHERE false;
