-- Deploy jobfence:page to pg
-- requires: jobs
BEGIN;
-- A dead letter pages someone, and the page cannot vanish (docs/observability.md, "Dead
-- letters"): one row per dead letter, written by jobs.tally in the transaction that fails
-- the job, delivered at least once by the reapers' forwarders (jobs.claim_pages,
-- jobs.settle_pages). A row describes its dead letter by itself, so a page outlives the
-- pruning of its job; its id is the stable id a receiver deduplicates on.
CREATE TABLE jobs.page (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id          bigint NOT NULL,
    kind            text NOT NULL,
    queue           text NOT NULL,
    error           text,
    reason          text NOT NULL,
    retry_count     integer NOT NULL,
    max_retries     integer NOT NULL,
    failed_at       timestamptz NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    -- Delivery: due again at due_at (a claim holds a page that long, so a forwarder killed
    -- mid-delivery leaves it to the next one; a failed attempt backs off), until delivered.
    attempts        integer NOT NULL DEFAULT 0,
    due_at          timestamptz NOT NULL DEFAULT now(),
    last_attempt_at timestamptz,
    last_error      text,
    delivered_at    timestamptz
);
-- The forwarders' claim: the few undelivered rows, by due time.
CREATE INDEX page_undelivered ON jobs.page (due_at, id) WHERE delivered_at IS NULL;
-- jobs.prune's retention of delivered pages.
CREATE INDEX page_created ON jobs.page (created_at);
COMMENT ON TABLE jobs.page IS
    'One row per dead letter, written in the transaction that failed the job; delivered at least once to the dead-letter webhook (jobs.claim_pages, jobs.settle_pages); listed by jobs.pages.';
REVOKE ALL ON jobs.page FROM PUBLIC;
COMMIT;
