-- Verify jobfence:fail_many on pg
-- Raises unless the one form is there (a pinned SECURITY DEFINER whose token defaults to
-- NULL) and the token-less overload is gone.
SELECT 1 / count(*) FROM pg_catalog.pg_proc
 WHERE oid = 'jobs.fail_many(bigint[], text, bigint[], text[], boolean[], uuid[])'::regprocedure AND pronargdefaults = 1
   AND prosecdef AND proconfig @> ARRAY['search_path=pg_catalog, pg_temp'];
SELECT 1 / (to_regprocedure('jobs.fail_many(bigint[], text, bigint[], text[], boolean[])') IS NULL)::int;
