-- Verify jobfence:define_type on pg
-- Raises when the function is missing or not a pinned SECURITY DEFINER.
SELECT 1 / count(*) FROM pg_catalog.pg_proc
 WHERE oid = 'jobs.define_type(text, text, interval, interval, integer, interval, interval, integer, interval, numeric, numeric, bigint, interval, numeric, integer, integer, integer, interval, text, integer)'::regprocedure
   AND prosecdef AND proconfig @> ARRAY['search_path=pg_catalog, pg_temp'];
