-- Revert jobfence:history from pg
-- The changes before this one read every claim and completion from jobs.event: those only the
-- job rows record go back in as rows (the submissions: event_submitted_on_job's revert),
-- with ids from the identity, after every row their job has.
BEGIN;
INSERT INTO jobs.event (job_id, at, from_status, to_status, lease_version, worker, session_role, reason, error)
SELECT h.job_id, h.at, h.from_status, h.to_status, h.lease_version, h.worker, h.session_role, h.reason, h.error
  FROM jobs.history AS h
 WHERE h.id >= 4503599627370496
 ORDER BY h.id;
DROP VIEW jobs.history;
COMMIT;
