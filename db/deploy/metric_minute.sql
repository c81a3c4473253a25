-- Deploy jobfence:metric_minute to pg
-- requires: jobs
BEGIN;
-- The rollup behind jobs.metrics (docs/observability.md): written by jobs.tally in the
-- transaction of each batch of transitions, so it is exact and never lags. One row per
-- minute, kind and shard; the shard (the writing backend's pid modulo 4) keeps concurrent
-- batches from queueing on one counter row until commit.
CREATE TABLE jobs.metric_minute (
    minute        timestamptz NOT NULL,
    kind          text NOT NULL,
    shard         smallint NOT NULL,
    submitted     bigint NOT NULL DEFAULT 0,
    started       bigint NOT NULL DEFAULT 0,
    succeeded     bigint NOT NULL DEFAULT 0,
    failed        bigint NOT NULL DEFAULT 0,     -- failed attempts (retried, reaped, timed out, exhausted, fatal)
    retried       bigint NOT NULL DEFAULT 0,
    reaped        bigint NOT NULL DEFAULT 0,
    cancelled     bigint NOT NULL DEFAULT 0,
    dead_lettered bigint NOT NULL DEFAULT 0,
    slo_met       bigint NOT NULL DEFAULT 0,     -- terminal within the kind's slo_latency
    ended_after   bigint[] NOT NULL DEFAULT '{0,0,0,0}',   -- terminal jobs by retries: 0, 1, 2, 3+
    -- Latency histograms (jobs.histogram_from): NULL until the first sample of the minute.
    -- integer counts: a minute of one shard never holds 2^31 samples, and three arrays of
    -- 92 int4 keep a row under the ~2 kB at which every update would be TOAST-compressed.
    wait_hist     integer[],
    run_hist      integer[],
    latency_hist  integer[],
    PRIMARY KEY (minute, kind, shard)
)
-- Every batch rewrites its minute's row: room on the page keeps those updates HOT.
WITH (fillfactor = 50);
COMMENT ON TABLE jobs.metric_minute IS
    'Per-minute, per-kind rollup of transitions and latency histograms, written by jobs.tally; read by jobs.metrics. Private.';
REVOKE ALL ON jobs.metric_minute FROM PUBLIC;
COMMIT;
