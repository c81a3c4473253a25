-- Verify jobfence:lease on pg
SELECT 'jobs.lease'::regtype;
