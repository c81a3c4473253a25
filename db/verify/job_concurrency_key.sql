-- Verify jobfence:job_concurrency_key on pg
SELECT concurrency_key FROM jobs.job WHERE false;
SELECT 1 / count(*) FROM pg_catalog.pg_class WHERE oid = to_regclass('jobs.job_queued_by_key_idx');
