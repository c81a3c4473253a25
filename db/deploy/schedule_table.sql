-- Deploy jobfence:schedule_table to pg
-- requires: jobs
BEGIN;
-- Periodic jobs: one row per named schedule. Written by jobs.schedule and jobs.unschedule;
-- the ticker (the reaper) moves ticked_through, last_tick, last_job_id and next_tick through
-- jobs.enqueue_tick and jobs.skip_ticks only. No foreign key to jobs.job_type (kinds are never
-- deleted, as for jobs.job) nor to jobs.job (jobs are pruned; the schedule stays).
CREATE TABLE jobs.schedule (
    name           text PRIMARY KEY,
    cron           text NOT NULL,
    kind           text NOT NULL,
    payload        jsonb NOT NULL DEFAULT '{}',
    timezone       text NOT NULL DEFAULT 'UTC',
    missed         text NOT NULL DEFAULT 'once',
    enabled        boolean NOT NULL DEFAULT true,
    -- Every tick at or before this instant is handled (enqueued, or skipped by the missed
    -- policy): the ticker looks for due ticks strictly after it. It only moves forward.
    ticked_through timestamptz NOT NULL DEFAULT now(),
    last_tick      timestamptz,
    last_job_id    bigint,
    -- As computed by the ticker in the schedule's time zone; shown by jobs.schedules(), never
    -- used to decide what is due (ticked_through and the cron text decide that).
    next_tick      timestamptz,
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT schedule_name_format CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9_.:/-]{0,127}$'),
    CONSTRAINT schedule_missed_policy CHECK (missed IN ('once', 'skip')),
    CONSTRAINT schedule_payload_object CHECK (jsonb_typeof(payload) = 'object'),
    CONSTRAINT schedule_last_tick_handled CHECK (last_tick <= ticked_through),
    CONSTRAINT schedule_next_tick_ahead CHECK (next_tick > ticked_through)
);
COMMENT ON TABLE jobs.schedule IS
    'Periodic jobs: a cron text in a time zone enqueues a job of kind with payload at each tick. Written by jobs.schedule / jobs.unschedule; ticked by the reaper through jobs.enqueue_tick and jobs.skip_ticks.';
COMMENT ON COLUMN jobs.schedule.ticked_through IS
    'Every tick at or before this instant was enqueued or skipped; due ticks are those after it, up to now().';
COMMENT ON COLUMN jobs.schedule.missed IS
    'Ticks missed while no ticker ran: once (enqueue the latest of them) or skip (enqueue none).';
REVOKE ALL ON jobs.schedule FROM PUBLIC;
COMMIT;
