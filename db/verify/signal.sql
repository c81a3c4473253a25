-- Verify jobfence:signal on pg
SELECT 'jobs.signal'::regtype;
