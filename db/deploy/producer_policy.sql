-- Deploy jobfence:producer_policy to pg
-- requires: jobs
BEGIN;
-- One row of settings for what producers may do to each other's jobs. A table the callers
-- cannot write, not a GUC: any session can SET a custom GUC, so a producer could switch a
-- GUC-based rule off for itself. Changed only through jobs.configure_producers (jobs_admin).
CREATE TABLE jobs.producer_policy (
    -- At most one row, so every reader sees the same setting.
    singleton  boolean PRIMARY KEY DEFAULT true CONSTRAINT producer_policy_one_row CHECK (singleton),
    -- On: cancel, get and mark_enqueue_failed act only on jobs submitted by the calling
    -- session's login role (jobs.job.submitted_by), unless it is a member of jobs_admin
    -- (get also for jobs_worker members: they read any payload by claiming anyway).
    ownership  boolean NOT NULL DEFAULT false,
    updated_at timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE jobs.producer_policy IS
    'Producer ownership setting (one row; default off). Changed only by jobs.configure_producers; read by cancel, get and mark_enqueue_failed.';
COMMENT ON COLUMN jobs.producer_policy.ownership IS
    'On: a producer may cancel, get and mark_enqueue_failed only the jobs its login role (session_user) submitted; members of jobs_admin may act on any job.';
REVOKE ALL ON jobs.producer_policy FROM PUBLIC;
INSERT INTO jobs.producer_policy DEFAULT VALUES;
COMMIT;
