-- Verify jobfence:kind_limit on pg
SELECT kind, max_running, rate_limit, rate_period, tokens, refilled_at FROM jobs.kind_limit WHERE false;
SELECT kind, job_id, lease_version FROM jobs.kind_slot WHERE false;
