-- Deploy jobfence:compensate to pg
-- requires: job
-- requires: job_type
-- requires: insert_jobs
BEGIN;
-- "Where a downstream effect cannot be rolled back, use a compensating action": for the
-- dead letters among job_ids whose kind names an on_dead kind (jobs.define_type), submit a
-- job of that kind in the same transaction, so the compensation commits with the failure or
-- not at all. Its payload names the failed job: {"dead_job": {"id", "kind", "queue",
-- "error", "reason", "retry_count", "payload"}}. Its idempotency key, "compensate:<id>",
-- makes it once per job: a replayed job that dead-letters again submits no second one.
-- Called by jobs.tally, the one place dead letters are recognised (pages are written there).
CREATE OR REPLACE FUNCTION jobs.compensate(job_ids bigint[], reasons text[])
RETURNS integer
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
DECLARE
    specs jsonb;
    submitted integer;
BEGIN
    SELECT jsonb_agg(jsonb_build_object(
               'kind', t.on_dead,
               'payload', jsonb_build_object('dead_job', jsonb_build_object(
                   'id', j.id, 'kind', j.kind, 'queue', j.queue, 'error', j.error, 'reason', d.reason,
                   'retry_count', j.retry_count, 'payload', j.payload)),
               'idempotency_key', 'compensate:' || j.id) ORDER BY j.id)
      INTO specs
      FROM unnest(job_ids, reasons) AS d(id, reason)
      JOIN jobs.job AS j ON j.id = d.id
      JOIN jobs.job_type AS t ON t.kind = j.kind
     WHERE t.on_dead IS NOT NULL AND d.reason IN ('exhausted', 'failed');
    IF specs IS NULL THEN
        RETURN 0;
    END IF;
    -- The failed job's payload went through the door once; a compensation that would not
    -- (its kind's max_payload_bytes smaller) fails the failing transaction, which is retried
    -- as any failed write is: declare the compensating kind with room for it.
    SELECT count(*) FILTER (WHERE s.created) INTO submitted
      FROM jobs.insert_jobs('jobs.compensate', specs, NULL, false) AS s;
    RETURN submitted;
END $$;
COMMENT ON FUNCTION jobs.compensate(bigint[], text[]) IS
    'Internal: submit the compensating job (the kind''s on_dead) of each dead letter, once per job (idempotency key compensate:<id>). Called by jobs.tally. Not granted to any role.';
REVOKE ALL ON FUNCTION jobs.compensate(bigint[], text[]) FROM PUBLIC;
COMMIT;
