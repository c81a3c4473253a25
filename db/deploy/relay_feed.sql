-- Deploy jobfence:relay_feed to pg
-- requires: job
BEGIN;
-- How new jobs reach the relay, and where the relay's reading of the table stands. One row,
-- written only by jobs.configure_relay and jobs.poll_submitted (both jobs_admin): a producer
-- cannot choose for everybody that submits stop notifying. docs/scaling.md says when to use
-- which source; docs/design.md §6 why reading the table this way misses no job.
CREATE TABLE jobs.relay_feed (
    singleton     boolean PRIMARY KEY DEFAULT true CONSTRAINT relay_feed_one_row CHECK (singleton),
    -- notify: every submit sends pg_notify('jobs_submitted') on commit (the default).
    -- table: submits send nothing; the relay reads new ids from jobs.job (poll_submitted).
    source        text NOT NULL DEFAULT 'notify' CONSTRAINT relay_feed_source CHECK (source IN ('notify', 'table')),
    -- Every job with an id up to this one has been read (NULL: the table is not read).
    read_upto     bigint,
    -- The next stretch to read: the last id drawn when it was taken, and a transaction id
    -- taken after that. Once no transaction up to horizon_xid is running, every id up to
    -- horizon_id is final: committed and visible, or never to be.
    horizon_id    bigint,
    horizon_xid   xid8,
    -- The source in force when the horizon was taken: a horizon taken under notify is the
    -- last one read after a switch back (what a submit that saw table before it drew).
    horizon_source text CONSTRAINT relay_feed_horizon_source CHECK (horizon_source IN ('notify', 'table')),
    changed_at    timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT relay_feed_horizon CHECK ((horizon_id IS NULL) = (horizon_xid IS NULL)
                                         AND (horizon_id IS NULL) = (horizon_source IS NULL)),
    CONSTRAINT relay_feed_read CHECK (horizon_id IS NULL OR read_upto IS NOT NULL)
);
COMMENT ON TABLE jobs.relay_feed IS
    'How submits reach the relay (one row): source notify (pg_notify on commit, the default) or table (the relay reads new ids with jobs.poll_submitted), and how far the table has been read. Changed only by jobs.configure_relay and jobs.poll_submitted.';
REVOKE ALL ON jobs.relay_feed FROM PUBLIC;
INSERT INTO jobs.relay_feed DEFAULT VALUES;
COMMIT;
