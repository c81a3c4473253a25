-- Verify jobfence:compensate on pg
SELECT 1 / count(*) FROM pg_catalog.pg_proc
 WHERE oid = 'jobs.compensate(bigint[], text[])'::regprocedure
   AND prosecdef AND proconfig @> ARRAY['search_path=pg_catalog, pg_temp'];
