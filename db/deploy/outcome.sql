-- Deploy jobfence:outcome to pg
-- requires: status
BEGIN;
CREATE TYPE jobs.outcome AS (
    job_id    bigint,
    accepted  boolean,
    status    jobs.status,
    run_after timestamptz,
    wake      bigint[]
);
COMMENT ON TYPE jobs.outcome IS 'Result of a write: accepted or not, the status it left, when it is due (status queued), and jobs it made claimable (signal them).';
COMMIT;
