-- Verify jobfence:status on pg
SELECT 1 / (count(*) = 5)::int FROM pg_catalog.pg_enum WHERE enumtypid = 'jobs.status'::regtype;
