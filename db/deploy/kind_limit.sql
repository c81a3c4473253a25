-- Deploy jobfence:kind_limit to pg
-- requires: job_type
BEGIN;
-- The running state of the kinds with a global limit (jobs.define_type's max_running,
-- rate_limit / rate_period), one row per limited kind and none for the others: the claims
-- read this table, never jobs.job_type, so the unlimited kinds pay nothing for the feature.
-- A claim of a limited kind locks its row (FOR UPDATE), which serialises the claimers of
-- that kind however many workers run.
CREATE TABLE jobs.kind_limit (
    kind        text PRIMARY KEY,
    max_running integer,
    rate_limit  integer,
    rate_period interval,
    -- Token bucket: up to rate_limit claims at once, refilled at rate_limit per rate_period.
    tokens      double precision NOT NULL DEFAULT 0,
    refilled_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT kind_limit_something CHECK (max_running IS NOT NULL OR rate_limit IS NOT NULL)
);
COMMENT ON TABLE jobs.kind_limit IS
    'Limited kinds only: their max_running and token bucket (rate_limit per rate_period), kept by jobs.define_type and the claims. Private.';
REVOKE ALL ON jobs.kind_limit FROM PUBLIC;

-- The leases a max_running kind holds: (job, lease_version) recorded at the claim. A slot
-- whose job has left processing, or moved to another lease, is dropped by the next claim of
-- the kind, so finishing, failing, reaping or cancelling a job needs no bookkeeping here,
-- and a slot can only ever over-count (never let the kind exceed its limit).
CREATE TABLE jobs.kind_slot (
    kind          text NOT NULL,
    job_id        bigint NOT NULL,
    lease_version bigint NOT NULL,
    CONSTRAINT kind_slot_pkey PRIMARY KEY (kind, job_id)
);
COMMENT ON TABLE jobs.kind_slot IS
    'Leases counted against a kind''s max_running (pruned lazily by the next claim of the kind). Private.';
REVOKE ALL ON jobs.kind_slot FROM PUBLIC;
COMMIT;
