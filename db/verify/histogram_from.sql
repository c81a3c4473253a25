-- Verify jobfence:histogram_from on pg
SELECT 1 / count(*) FROM pg_catalog.pg_proc
 WHERE oid = 'jobs.histogram_from(integer[], integer[])'::regprocedure
   AND prosecdef AND proconfig @> ARRAY['search_path=pg_catalog, pg_temp'];
