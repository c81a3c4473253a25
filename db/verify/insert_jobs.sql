-- Verify jobfence:insert_jobs on pg
-- Raises when either form of the function is missing or not a pinned SECURITY DEFINER.
SELECT 1 / count(*) FROM pg_catalog.pg_proc
 WHERE oid = 'jobs.insert_jobs(text, jsonb, bigint, boolean)'::regprocedure
   AND prosecdef AND proconfig @> ARRAY['search_path=pg_catalog, pg_temp'];
SELECT 1 / count(*) FROM pg_catalog.pg_proc
 WHERE oid = 'jobs.insert_job_rows(text, jsonb, bigint, boolean)'::regprocedure
   AND prosecdef AND proconfig @> ARRAY['search_path=pg_catalog, pg_temp'];
