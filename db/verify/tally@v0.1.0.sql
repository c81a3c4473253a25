-- Verify jobfence:tally on pg
SELECT 1 / count(*) FROM pg_catalog.pg_proc
 WHERE oid = 'jobs.tally(text[], text[], boolean[], double precision[], double precision[], double precision[], integer[], bigint[])'::regprocedure
   AND prosecdef AND proconfig @> ARRAY['search_path=pg_catalog, pg_temp'];
