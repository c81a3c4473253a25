-- Verify jobfence:histogram_quantile on pg
SELECT 1 / count(*) FROM pg_catalog.pg_proc
 WHERE oid = 'jobs.histogram_quantile(bigint[], double precision)'::regprocedure
   AND prosecdef AND proconfig @> ARRAY['search_path=pg_catalog, pg_temp'];
