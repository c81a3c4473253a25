-- Verify jobfence:job_unique_scope on pg
-- Raises when the columns or the scoped unique index are missing.
SELECT unique_states, unique_until FROM jobs.job WHERE false;
SELECT 1 / count(*) FROM pg_catalog.pg_index
 WHERE indexrelid = 'jobs.job_idempotency_scope_idx'::regclass AND indisunique;
