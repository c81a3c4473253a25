-- Verify jobfence:metric_minute on pg
SELECT minute, kind, shard, submitted, started, succeeded, failed, retried, reaped, cancelled,
       dead_lettered, slo_met, ended_after, wait_hist, run_hist, latency_hist
  FROM jobs.metric_minute WHERE false;
