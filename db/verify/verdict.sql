-- Verify jobfence:verdict on pg
SELECT 1 / (count(*) = 6)::int FROM pg_catalog.pg_enum WHERE enumtypid = 'jobs.verdict'::regtype;
