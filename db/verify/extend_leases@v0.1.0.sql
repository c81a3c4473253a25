-- Verify jobfence:extend_leases on pg
-- Raises when the function is missing or not a pinned SECURITY DEFINER.
SELECT 1 / count(*) FROM pg_catalog.pg_proc
 WHERE oid = 'jobs.extend_leases(bigint[], text, bigint[], uuid[])'::regprocedure
   AND prosecdef AND proconfig @> ARRAY['search_path=pg_catalog, pg_temp'];
