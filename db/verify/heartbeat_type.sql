-- Verify jobfence:heartbeat_type on pg
SELECT 'jobs.heartbeat'::regtype;
SELECT (NULL::jobs.heartbeat).alive, (NULL::jobs.heartbeat).cancel_requested, (NULL::jobs.heartbeat).lease_expires_at;
