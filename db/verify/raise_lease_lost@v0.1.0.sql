-- Verify jobfence:raise_lease_lost on pg
-- Raises when the function is missing or not a pinned SECURITY DEFINER.
SELECT 1 / count(*) FROM pg_catalog.pg_proc
 WHERE oid = 'jobs.raise_lease_lost(text, bigint, text, bigint)'::regprocedure
   AND prosecdef AND proconfig @> ARRAY['search_path=pg_catalog, pg_temp'];
