-- Verify jobfence:jobs_producer on pg
SELECT 1 / count(*) FROM pg_catalog.pg_roles WHERE rolname = 'jobs_producer';
