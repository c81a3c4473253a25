-- Verify jobfence:kind_limit_per_key on pg
SELECT max_running_per_key FROM jobs.job_type WHERE false;
SELECT max_running_per_key FROM jobs.kind_limit WHERE false;
SELECT concurrency_key FROM jobs.kind_slot WHERE false;
