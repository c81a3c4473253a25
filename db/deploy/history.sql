-- Deploy jobfence:history to pg
-- requires: job
-- requires: event
-- requires: event_submitted_on_job
BEGIN;
-- Every transition of every job, in the columns of jobs.event (docs/design.md "What is
-- recorded where"). The job row records what it holds unchanged until the job ends:
--   - the submission (created_at, submitted_by, lease_version 0);
--   - the claim of its current or last lease (claimed_at, owned_by, claim_role,
--     lease_version: kept while it runs and once it is done), until a row of that lease is
--     written, which writes the claim's row first (jobs.cancel, jobs.finish_leases);
--   - a completion by the claim's own role (finished_at; done keeps the claim's fields).
-- Every other transition is a row of jobs.event. The readers of a history (jobs.events,
-- jobs.audit, an administrator's query) read this view, so the rule of where a transition
-- is kept lives here once for reading.
--
-- Ids: a submission's is the job's id negated, below every id jobs.event's identity hands out
-- (it counts up from 1); a claim and a completion read from the row take 2^52 + 2 × the job's
-- id (+ 1 for the completion), above every id the identity will hand out in practice (2^52
-- is 142 years of a million transitions a second) and still exact as a JSON number. Those
-- two come after all of their job's rows, as they happened: a row of their lease would have
-- written the claim as a row. Ordered by id, a job's rows are its history.
--
-- Release 0.1 wrote every transition as a row: the NOT EXISTS tests read a job's
-- claim or completion from its row only when jobs.event does not hold it. A filter on job_id
-- reaches every branch: the job's primary key and event_job_idx.
CREATE VIEW jobs.history AS
SELECT -j.id AS id, j.id AS job_id, j.created_at AS at, NULL::jobs.status AS from_status,
       'queued'::jobs.status AS to_status, 0::bigint AS lease_version, NULL::text AS worker,
       j.submitted_by AS session_role, 'submitted'::text AS reason, NULL::text AS error
  FROM jobs.job AS j
UNION ALL
SELECT e.id, e.job_id, e.at, e.from_status, e.to_status, e.lease_version, e.worker,
       e.session_role, e.reason, e.error
  FROM jobs.event AS e
UNION ALL
SELECT 4503599627370496 + 2 * j.id, j.id, j.claimed_at, 'queued'::jobs.status, 'processing'::jobs.status,
       j.lease_version, j.owned_by, j.claim_role, 'claimed'::text, NULL::text
  FROM jobs.job AS j
 WHERE j.status IN ('processing', 'done') AND j.claimed_at IS NOT NULL
   AND NOT EXISTS (SELECT 1 FROM jobs.event AS c
                    WHERE c.job_id = j.id AND c.reason = 'claimed' AND c.lease_version = j.lease_version)
UNION ALL
SELECT 4503599627370496 + 2 * j.id + 1, j.id, j.finished_at, 'processing'::jobs.status, 'done'::jobs.status,
       j.lease_version, j.owned_by, j.claim_role, 'completed'::text, NULL::text
  FROM jobs.job AS j
 WHERE j.status = 'done'
   AND NOT EXISTS (SELECT 1 FROM jobs.event AS c WHERE c.job_id = j.id AND c.reason = 'completed');
COMMENT ON VIEW jobs.history IS
    'Every transition of every job, as jobs.event rows: the submission (id: the job''s id negated), and the claim and completion of a lease its claimant completed (ids 2^52 + 2 × job id, + 1), read from the job row; every other transition from jobs.event. Ordered by id, a job''s rows are its history.';
REVOKE ALL ON jobs.history FROM PUBLIC;
COMMIT;
