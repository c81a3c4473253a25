-- Verify jobfence:event on pg
SELECT id, job_id, at, from_status, to_status, lease_version, worker, session_role, reason, error
  FROM jobs.event WHERE false;
