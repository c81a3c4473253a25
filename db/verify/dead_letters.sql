-- Verify jobfence:dead_letters on pg
SELECT 1 / count(*) FROM pg_catalog.pg_proc
 WHERE oid = 'jobs.dead_letters(bigint[])'::regprocedure
   AND prosecdef AND proconfig @> ARRAY['search_path=pg_catalog, pg_temp'];
