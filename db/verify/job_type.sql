-- Verify jobfence:job_type on pg
SELECT kind, queue, lease_timeout, timeout, max_retries, backoff_base, backoff_max,
       max_payload_bytes, slo_latency, slo_target, slo_success, max_backlog, run_time_budget,
       max_failure_rate, priority, max_running, rate_limit, rate_period, created_at, updated_at
  FROM jobs.job_type WHERE false;
