-- Verify jobfence:outcome on pg
SELECT 'jobs.outcome'::regtype;
