-- Verify jobfence:job on pg
SELECT id, kind, queue, payload, status, result, error, created_at, updated_at, claimed_at,
       finished_at, owned_by, claim_role, lease_version, retry_count, max_retries, lease_timeout, timeout,
       run_after, lease_expires_at, idempotency_key, ordering_key, parent_id, pending_children,
       cancel_requested_at, priority, submitted_by, key_owner
  FROM jobs.job WHERE false;
SELECT 1 / count(*) FROM pg_catalog.pg_indexes
 WHERE schemaname = 'jobs' AND indexname = 'job_idempotency_key_idx';
