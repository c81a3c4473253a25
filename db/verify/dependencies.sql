-- Verify jobfence:dependencies on pg
-- Raises when the function is missing or not a pinned SECURITY DEFINER.
SELECT 1 / count(*) FROM pg_catalog.pg_proc
 WHERE oid = 'jobs.dependencies(bigint)'::regprocedure
   AND prosecdef AND proconfig @> ARRAY['search_path=pg_catalog, pg_temp'];
