-- Verify jobfence:jobs_admin on pg
SELECT 1 / count(*) FROM pg_catalog.pg_roles WHERE rolname = 'jobs_admin';
