-- Verify jobfence:claimable on pg
SELECT id, status, run_after, pending_children, ordering_key, concurrency_key, traceparent FROM jobs.claimable WHERE false;
