-- Deploy jobfence:history to pg
-- requires: job
-- requires: event
-- requires: event_submitted_on_job
BEGIN;
-- Every transition of every job, in the columns of jobs.event: the submission read from the
-- job row, every later transition from jobs.event (docs/design.md "What is recorded where").
-- The readers of a history (jobs.events, jobs.audit, an administrator's query) read this,
-- so the rule of where a transition is kept lives here once.
--
-- The submission's id is the job's id negated: unique, never handed out by jobs.event's
-- identity (which counts up from 1), and below every later event's, so ordering by id keeps
-- a history in the order it happened. A filter on job_id reaches both branches: the job's
-- primary key and event_job_idx.
CREATE VIEW jobs.history AS
SELECT -j.id AS id, j.id AS job_id, j.created_at AS at, NULL::jobs.status AS from_status,
       'queued'::jobs.status AS to_status, 0::bigint AS lease_version, NULL::text AS worker,
       j.submitted_by AS session_role, 'submitted'::text AS reason, NULL::text AS error
  FROM jobs.job AS j
UNION ALL
SELECT e.id, e.job_id, e.at, e.from_status, e.to_status, e.lease_version, e.worker,
       e.session_role, e.reason, e.error
  FROM jobs.event AS e;
COMMENT ON VIEW jobs.history IS
    'Every transition of every job, as jobs.event rows: the submission (new -> queued, lease_version 0) read from the job row (id: the job''s id negated, at: created_at, session_role: submitted_by), every later transition from jobs.event. Ordered by id, a job''s rows are its history.';
REVOKE ALL ON jobs.history FROM PUBLIC;
COMMIT;
