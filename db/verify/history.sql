-- Verify jobfence:history on pg
-- Raises unless the view has jobs.event's columns, in order.
SELECT id, job_id, at, from_status, to_status, lease_version, worker, session_role, reason, error
  FROM jobs.history WHERE false;
