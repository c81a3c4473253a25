-- Deploy jobfence:submit to pg
-- requires: insert_jobs
BEGIN;
-- New parameters go last, with defaults, so every call of the first release (by position
-- or by name) means what it meant. CREATE OR REPLACE cannot add parameters: the released
-- form is dropped in the transaction that creates this one, so no call finds neither.
DROP FUNCTION jobs.submit(text, jsonb, text, timestamptz, text, boolean, integer);
CREATE FUNCTION jobs.submit(
    kind            text,
    payload         jsonb DEFAULT '{}',
    idempotency_key text DEFAULT NULL,
    run_after       timestamptz DEFAULT NULL,
    ordering_key    text DEFAULT NULL,
    notify          boolean DEFAULT true,
    priority        integer DEFAULT NULL,
    unique_while    jobs.status[] DEFAULT NULL,
    unique_for      interval DEFAULT NULL,
    debounce        text DEFAULT NULL,
    traceparent     text DEFAULT NULL,
    depends_on      bigint[] DEFAULT NULL,
    on_dependency_failure text DEFAULT NULL,
    concurrency_key text DEFAULT NULL)
RETURNS jobs.job
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
DECLARE
    submitted jobs.job;
BEGIN
    -- SQL NULL takes the default {}; a JSON null is a value, and not an object.
    IF jsonb_typeof(payload) = 'null' THEN
        RAISE EXCEPTION 'jobs.submit: payload must be a JSON object, got null'
            USING ERRCODE = '22023', HINT = 'Pass ''{}'' (or omit it) for no payload.';
    END IF;
    -- PL/pgSQL rather than SQL: it caches the plan; a non-inlinable SQL function re-plans every call.
    -- The spec carries unique_for as text, read back by insert_jobs in this same session
    -- (so under the same IntervalStyle).
    SELECT (r.job).* INTO submitted
      FROM jobs.insert_jobs(
               'jobs.submit',
               jsonb_build_array(jsonb_build_object(
                   'kind', submit.kind, 'payload', submit.payload,
                   'idempotency_key', submit.idempotency_key, 'run_after', submit.run_after,
                   'ordering_key', submit.ordering_key, 'notify', coalesce(submit.notify, true),
                   'priority', submit.priority, 'unique_while', to_jsonb(submit.unique_while),
                   'unique_for', submit.unique_for::text, 'debounce', submit.debounce,
                   'traceparent', submit.traceparent, 'depends_on', to_jsonb(submit.depends_on),
                   'on_dependency_failure', submit.on_dependency_failure,
                   'concurrency_key', submit.concurrency_key)),
               NULL, true) AS r;
    RETURN submitted;
END $$;
COMMENT ON FUNCTION jobs.submit(text, jsonb, text, timestamptz, text, boolean, integer, jobs.status[], interval, text, text, bigint[], text, text) IS
    'Create a queued job (new -> queued), under the producer''s W3C traceparent when given. A repeated idempotency_key returns the job holding the key (unique_while: the states in which it holds it, including queued; unique_for: for how long; NULL: always), changed by debounce (payload, run_after or payload_and_run_after) while it is queued. depends_on: ids of jobs that must be done first; on_dependency_failure: fail (default), run or wait, what a failed one does to this job. concurrency_key: the key the kind''s max_running_per_key counts by, and claim_next takes turns between. With notify, pg_notify(''jobs_submitted'', {id, queue, run_after}) is delivered on commit. priority: 0 (first) to 9, NULL for the kind''s.';
REVOKE ALL ON FUNCTION jobs.submit(text, jsonb, text, timestamptz, text, boolean, integer, jobs.status[], interval, text, text, bigint[], text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jobs.submit(text, jsonb, text, timestamptz, text, boolean, integer, jobs.status[], interval, text, text, bigint[], text, text) TO jobs_producer, jobs_admin;
COMMIT;
