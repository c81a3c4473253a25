-- Deploy jobfence:job_type to pg
-- requires: jobs
BEGIN;
CREATE TABLE jobs.job_type (
    kind              text PRIMARY KEY,
    queue             text NOT NULL DEFAULT 'default',
    lease_timeout     interval NOT NULL DEFAULT '15 seconds',
    timeout           interval NOT NULL DEFAULT '30 seconds',
    max_retries       integer NOT NULL DEFAULT 3,
    backoff_base      interval NOT NULL DEFAULT '1 second',
    backoff_max       interval NOT NULL DEFAULT '5 minutes',
    max_payload_bytes integer NOT NULL DEFAULT 262144,
    slo_latency       interval NOT NULL DEFAULT '25 seconds',
    slo_target        numeric NOT NULL DEFAULT 0.95,
    -- Success is an objective of its own (reliability contract §7), and the alert bounds
    -- live beside the objectives so every exporter and dashboard reads the same ones.
    slo_success       numeric NOT NULL DEFAULT 0.99,
    max_backlog       bigint NOT NULL DEFAULT 10000,
    run_time_budget   interval,          -- NULL: half the kind's timeout (jobs.metrics)
    max_failure_rate  numeric NOT NULL DEFAULT 0.05,
    -- Lower runs first; copied to each job at submit unless the submit names one.
    priority          smallint NOT NULL DEFAULT 0,
    -- Global bounds enforced at claim (jobs.grant_leases); NULL is unlimited. Their running
    -- state lives in jobs.kind_limit, which holds a row only for the limited kinds.
    max_running       integer,
    rate_limit        integer,
    rate_period       interval,
    -- Compensation: the kind submitted, in the transaction that dead-letters a job of this
    -- kind, to undo what cannot be rolled back (jobs.compensate). NULL: none.
    on_dead           text,
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now(),
    -- define_type validates with friendlier errors; these keep a hand edit honest too.
    CONSTRAINT job_type_lease_timeout_positive CHECK (lease_timeout > interval '0'),
    CONSTRAINT job_type_timeout_positive CHECK (timeout > interval '0'),
    CONSTRAINT job_type_max_retries_range CHECK (max_retries BETWEEN 0 AND 1000),
    CONSTRAINT job_type_backoff_order CHECK (backoff_base > interval '0' AND backoff_max >= backoff_base),
    CONSTRAINT job_type_payload_limit_positive CHECK (max_payload_bytes > 0),
    CONSTRAINT job_type_slo_latency_positive CHECK (slo_latency > interval '0'),
    CONSTRAINT job_type_slo_target_range CHECK (slo_target > 0 AND slo_target < 1),
    CONSTRAINT job_type_slo_success_range CHECK (slo_success > 0 AND slo_success < 1),
    CONSTRAINT job_type_max_backlog_positive CHECK (max_backlog > 0),
    CONSTRAINT job_type_run_time_budget_positive CHECK (run_time_budget > interval '0'),
    CONSTRAINT job_type_max_failure_rate_range CHECK (max_failure_rate >= 0 AND max_failure_rate <= 1),
    CONSTRAINT job_type_priority_range CHECK (priority BETWEEN 0 AND 9),
    CONSTRAINT job_type_max_running_positive CHECK (max_running > 0),
    CONSTRAINT job_type_rate_limit_complete CHECK ((rate_limit IS NULL) = (rate_period IS NULL)),
    CONSTRAINT job_type_rate_limit_positive CHECK (rate_limit > 0 AND rate_period > interval '0'),
    CONSTRAINT job_type_on_dead_other CHECK (on_dead <> kind)
);
COMMENT ON TABLE jobs.job_type IS
    'Per-kind definition (queue, lease, execution timeout, retry budget, backoff, payload limit, SLOs and alert bounds). Written by jobs.define_type.';
REVOKE ALL ON jobs.job_type FROM PUBLIC;
COMMIT;
