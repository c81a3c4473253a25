-- Revert jobfence:submit from pg: back to the body released in v0.1.0
BEGIN;
DROP FUNCTION jobs.submit(text, jsonb, text, timestamptz, text, boolean, integer, jobs.status[], interval, text, text, bigint[], text, text);
CREATE FUNCTION jobs.submit(
    kind            text,
    payload         jsonb DEFAULT '{}',
    idempotency_key text DEFAULT NULL,
    run_after       timestamptz DEFAULT NULL,
    ordering_key    text DEFAULT NULL,
    notify          boolean DEFAULT true,
    priority        integer DEFAULT NULL)
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
    SELECT (r.job).* INTO submitted
      FROM jobs.insert_jobs(
               'jobs.submit',
               jsonb_build_array(jsonb_build_object(
                   'kind', submit.kind, 'payload', submit.payload,
                   'idempotency_key', submit.idempotency_key, 'run_after', submit.run_after,
                   'ordering_key', submit.ordering_key, 'notify', coalesce(submit.notify, true),
                   'priority', submit.priority)),
               NULL, true) AS r;
    RETURN submitted;
END $$;
COMMENT ON FUNCTION jobs.submit(text, jsonb, text, timestamptz, text, boolean, integer) IS
    'Create a queued job (new -> queued). A repeated idempotency_key returns the existing job unchanged. With notify, pg_notify(''jobs_submitted'', {id, queue, run_after}) is delivered on commit. priority: 0 (first) to 9, NULL for the kind''s.';
REVOKE ALL ON FUNCTION jobs.submit(text, jsonb, text, timestamptz, text, boolean, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jobs.submit(text, jsonb, text, timestamptz, text, boolean, integer) TO jobs_producer, jobs_admin;
COMMIT;
