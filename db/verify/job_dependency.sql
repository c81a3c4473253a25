-- Verify jobfence:job_dependency on pg
SELECT job_id, depends_on, on_failure, released_at FROM jobs.job_dependency WHERE false;
SELECT has_dependents FROM jobs.job WHERE false;
