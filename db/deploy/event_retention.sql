-- Deploy jobfence:event_retention to pg
-- requires: jobs
BEGIN;
-- What retention has released. jobs.prune deletes job rows; their events stay in their day
-- partitions until jobs.drop_event_partitions drops those whole. In between, a history has no
-- job: jobs.audit accepts that only when its last event is older than released_before (the
-- latest cutoff jobs.prune used), and reports it otherwise, as before partitioning.
CREATE TABLE jobs.event_retention (
    -- At most one row, so every reader sees the same horizon.
    singleton       boolean PRIMARY KEY DEFAULT true CONSTRAINT event_retention_one_row CHECK (singleton),
    -- Only moves forward: a shorter cutoff used once by hand released what it released.
    released_before timestamptz NOT NULL DEFAULT '-infinity',
    updated_at      timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE jobs.event_retention IS
    'Retention horizon (one row): jobs finished before released_before may have been pruned while their events wait for their partition to be dropped. Written by jobs.prune, read by jobs.audit.';
REVOKE ALL ON jobs.event_retention FROM PUBLIC;
INSERT INTO jobs.event_retention DEFAULT VALUES;
COMMIT;
