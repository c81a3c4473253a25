-- Deploy jobfence:repeat_differences to pg
-- requires: job_unique_scope
-- requires: job_concurrency_key
-- requires: job
-- requires: key_owner
-- requires: jobs_producer
-- requires: jobs_admin
BEGIN;
-- For callers that treat a repeated idempotency key carrying a different request as an error
-- (the HTTP API answers 422, as the IETF Idempotency-Key draft says): which of the given
-- specs name a key that an existing job of the caller's key namespace holds, and which of
-- the request's fields differ from what that job was submitted with. jobs.submit and
-- jobs.submit_many themselves keep returning the existing job, whatever the repeat carries.
-- Compared: payload (as jsonb: key order and spacing do not matter), ordering_key,
-- concurrency_key, and
-- run_after and priority when the spec names them (run_after as the job's due_at: a past
-- timestamp was submitted as its creation time). The kind is part of the key. Call it in
-- the transaction of the submit, for the specs that were not created, to act on the answer
-- before committing. `pos` is the spec's 0-based position in specs. With scoped keys several
-- jobs may share a key: the repeat is compared with the one holding it (in scope), or else the
-- newest, as jobs.insert_jobs answers. A spec that asks for a debounce differs on purpose
-- and is never reported.
CREATE OR REPLACE FUNCTION jobs.repeat_differences(specs jsonb)
RETURNS TABLE (pos integer, idempotency_key text, job_id bigint, differs text[])
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
DECLARE
    owner_ regrole := jobs.key_owner();
BEGIN
    IF specs IS NULL OR jsonb_typeof(specs) <> 'array' OR jsonb_array_length(specs) > 10000 THEN
        RAISE EXCEPTION 'jobs.repeat_differences: expected a JSON array of at most 10000 job specs'
            USING ERRCODE = '22023', HINT = 'Pass the specs given to jobs.submit_many.';
    END IF;
    RETURN QUERY
    SELECT (e.ord - 1)::integer, j.idempotency_key, j.id, d.differs
      FROM jsonb_array_elements(specs) WITH ORDINALITY AS e(spec, ord)
     CROSS JOIN LATERAL (
           -- The holder through the unique index; the newest only when none is in scope
           -- (UNION ALL with LIMIT stops at the first branch that answers), so a key
           -- submitted ten thousand times is not sorted per spec.
           (SELECT h.* FROM jobs.job AS h
             WHERE jsonb_typeof(e.spec) = 'object'
               AND coalesce(jsonb_typeof(e.spec -> 'debounce'), 'null') = 'null'
               AND h.kind = e.spec ->> 'kind'
               AND h.idempotency_key = e.spec ->> 'idempotency_key'
               AND h.key_owner IS NOT DISTINCT FROM owner_
               AND (h.unique_states IS NULL OR h.status = ANY (h.unique_states))
             LIMIT 1)
           UNION ALL
           (SELECT h.* FROM jobs.job AS h
             WHERE jsonb_typeof(e.spec) = 'object'
               AND coalesce(jsonb_typeof(e.spec -> 'debounce'), 'null') = 'null'
               AND h.kind = e.spec ->> 'kind'
               AND h.idempotency_key = e.spec ->> 'idempotency_key'
               AND h.key_owner IS NOT DISTINCT FROM owner_
             ORDER BY h.id DESC
             LIMIT 1)
           LIMIT 1) AS j
     CROSS JOIN LATERAL (
           SELECT ARRAY(SELECT f FROM unnest(ARRAY[
                      CASE WHEN j.payload IS DISTINCT FROM coalesce(nullif(e.spec -> 'payload', 'null'), '{}') THEN 'payload' END,
                      CASE WHEN j.ordering_key IS DISTINCT FROM e.spec ->> 'ordering_key' THEN 'ordering_key' END,
                      CASE WHEN j.concurrency_key IS DISTINCT FROM e.spec ->> 'concurrency_key' THEN 'concurrency_key' END,
                      CASE WHEN jsonb_typeof(e.spec -> 'run_after') = 'string'
                                AND greatest((e.spec ->> 'run_after')::timestamptz, j.created_at) IS DISTINCT FROM j.due_at
                           THEN 'run_after' END,
                      CASE WHEN jsonb_typeof(e.spec -> 'priority') = 'number'
                                AND (e.spec ->> 'priority')::numeric IS DISTINCT FROM j.priority
                           THEN 'priority' END]) AS f
                   WHERE f IS NOT NULL) AS differs) AS d
     WHERE cardinality(d.differs) > 0
     ORDER BY e.ord;
END $$;
COMMENT ON FUNCTION jobs.repeat_differences(jsonb) IS
    'For specs whose idempotency key an existing job holds: the fields (payload, ordering_key, concurrency_key, run_after, priority) in which the spec differs from that job. Only specs that differ are returned. Granted to jobs_producer and jobs_admin.';
REVOKE ALL ON FUNCTION jobs.repeat_differences(jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jobs.repeat_differences(jsonb) TO jobs_producer, jobs_admin;
COMMIT;
