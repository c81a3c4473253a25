-- Verify jobfence:claimable on pg
SELECT id, status, run_after, pending_children, ordering_key FROM jobs.claimable WHERE false;
