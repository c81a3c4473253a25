-- Verify jobfence:jobs on pg
SELECT pg_catalog.has_schema_privilege('jobs', 'usage');
SELECT 1 / count(*) FROM pg_catalog.pg_namespace WHERE nspname = 'jobs';
