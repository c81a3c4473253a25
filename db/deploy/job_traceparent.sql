-- Deploy jobfence:job_traceparent to pg
-- requires: job
BEGIN;
-- The producer's trace context (docs/observability.md, "Tracing"): the W3C traceparent of
-- the span that submitted the job, so each attempt's span links back to it whatever
-- language submitted and whatever language runs it. Written once, at submit; read by
-- workers through jobs.trace_contexts, only when they trace.
ALTER TABLE jobs.job
    ADD COLUMN traceparent text,
    -- The format of W3C Trace Context level 1 (version 00), lower-case hex: the check that
    -- keeps a hand edit honest; insert_jobs refuses a malformed one with a friendlier 22023.
    ADD CONSTRAINT job_traceparent_format CHECK (
        traceparent ~ '^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$');
COMMENT ON COLUMN jobs.job.traceparent IS
    'The W3C traceparent of the span that submitted the job (NULL: none); the attempts'' spans link to it.';
COMMIT;
