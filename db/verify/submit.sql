-- Verify jobfence:submit on pg
-- Raises unless the one form is there (a pinned SECURITY DEFINER) and the released
-- seven-parameter form is gone.
SELECT 1 / count(*) FROM pg_catalog.pg_proc
 WHERE oid = 'jobs.submit(text, jsonb, text, timestamptz, text, boolean, integer, jobs.status[], interval, text, text, bigint[], text, text)'::regprocedure
   AND prosecdef AND proconfig @> ARRAY['search_path=pg_catalog, pg_temp'];
SELECT 1 / (to_regprocedure('jobs.submit(text, jsonb, text, timestamptz, text, boolean, integer)') IS NULL)::int;
