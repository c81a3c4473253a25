-- Deploy jobfence:trace_contexts to pg
-- requires: job_traceparent
-- requires: jobs_worker
-- requires: jobs_admin
BEGIN;
-- What a tracing worker reads after a claim (docs/observability.md, "Tracing"): the trace
-- context each job was submitted under, for the batch in one round trip. A separate call,
-- not a column of the lease, so a worker that does not trace pays nothing for it. Only jobs
-- with a context are returned.
CREATE OR REPLACE FUNCTION jobs.trace_contexts(job_ids bigint[])
RETURNS TABLE (job_id bigint, traceparent text)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
-- A session's first generic plan may be made on an empty table; id = ANY must stay a
-- primary-key probe once the table is large.
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
AS $$
BEGIN
    IF job_ids IS NULL OR cardinality(job_ids) > 10000 THEN
        RAISE EXCEPTION 'jobs.trace_contexts: job_ids must be an array of at most 10000 ids'
            USING ERRCODE = '22023', HINT = 'Pass the ids of the batch just claimed.';
    END IF;
    RETURN QUERY
    SELECT j.id, j.traceparent FROM jobs.job AS j
     WHERE j.id = ANY (trace_contexts.job_ids) AND j.traceparent IS NOT NULL
     ORDER BY j.id;
END $$;
COMMENT ON FUNCTION jobs.trace_contexts(bigint[]) IS
    'The W3C traceparent each of the given jobs was submitted under (jobs without one are left out), for the attempts'' spans. At most 10000 ids (more: 22023). Granted to jobs_worker and jobs_admin.';
REVOKE ALL ON FUNCTION jobs.trace_contexts(bigint[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jobs.trace_contexts(bigint[]) TO jobs_worker, jobs_admin;
COMMIT;
