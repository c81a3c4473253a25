-- Verify jobfence:live_slot on pg
SELECT kind, job_id, lease_version, concurrency_key FROM jobs.live_slot WHERE false;
