-- Deploy jobfence:job_dependency to pg
-- requires: job
BEGIN;
-- Dependencies between jobs (docs/sql-api.md "Dependencies"): one row per edge, "job_id runs
-- after depends_on is done". A job waits while jobs.job.pending_children counts its unmet
-- edges (beside its fan-out children, the one counter every claim path already reads), so
-- claiming, signals and the blocked count need nothing new. released_at is when the edge
-- stopped holding the job back: its parent was done, or failed under the policy run or
-- fail; an edge under wait stays unreleased until a replay of the parent is done.
-- A job's finish looks for dependents only when it has some: the flag is set with the first
-- edge that names it, so a job nothing depends on pays one boolean read at its end.
ALTER TABLE jobs.job ADD COLUMN has_dependents boolean NOT NULL DEFAULT false;
COMMENT ON COLUMN jobs.job.has_dependents IS
    'Whether a job_dependency edge names this job as depends_on: its end releases or fails those dependents.';
CREATE TABLE jobs.job_dependency (
    job_id      bigint NOT NULL REFERENCES jobs.job (id) ON DELETE CASCADE,
    depends_on  bigint NOT NULL REFERENCES jobs.job (id) ON DELETE CASCADE,
    on_failure  text NOT NULL,
    released_at timestamptz,
    PRIMARY KEY (job_id, depends_on),
    CONSTRAINT job_dependency_policy CHECK (on_failure IN ('fail', 'run', 'wait')),
    CONSTRAINT job_dependency_not_self CHECK (job_id <> depends_on)
);
COMMENT ON TABLE jobs.job_dependency IS
    'Edges of the job graph: job_id runs once depends_on is done; on_failure (fail, run, wait) says what a failed depends_on does to it; released_at: when the edge stopped holding job_id back.';
REVOKE ALL ON jobs.job_dependency FROM PUBLIC;
-- A job's dependents, for jobs.dependents and for the foreign key's check when a pruned
-- parent goes; the parent's end reads only the unreleased ones.
CREATE INDEX job_dependency_depends_on_idx ON jobs.job_dependency (depends_on, job_id);
COMMIT;
