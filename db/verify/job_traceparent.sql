-- Verify jobfence:job_traceparent on pg
SELECT traceparent FROM jobs.job WHERE false;
