-- Verify jobfence:lease_tokens on pg
-- Raises when either form is missing or not a pinned SECURITY DEFINER.
SELECT 1 / (count(*) = 2)::integer FROM pg_catalog.pg_proc
 WHERE oid IN ('jobs.lease_tokens(bigint[], bigint[])'::regprocedure,
               'jobs.lease_tokens(bigint[], bigint[], uuid[])'::regprocedure)
   AND prosecdef AND proconfig @> ARRAY['search_path=pg_catalog, pg_temp'];
