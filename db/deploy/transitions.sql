-- Deploy jobfence:transitions to pg
-- requires: status
-- requires: event_reason_debounced
-- requires: event_reason_dependencies
BEGIN;
-- The legal transition table of docs/sql-api.md in one place: every event a jobs.* function
-- writes is one of these rows (the pgTAP suite and the property tests read it from here and
-- check every event they cause against it). Drivers and dashboards may read it too.
CREATE OR REPLACE FUNCTION jobs.transitions()
RETURNS TABLE (reason text, from_status jobs.status, to_status jobs.status, bumps_lease_version boolean)
LANGUAGE plpgsql IMMUTABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
BEGIN
    RETURN QUERY
    SELECT t.reason, t.from_status::jobs.status, t.to_status::jobs.status, t.bumps
      FROM (VALUES
        ('submitted',        NULL,             'queued',         false),
        -- A repeated key's debounce: the payload or run_after changes, the state does not.
        ('debounced',        'queued',         'queued',         false),
        ('enqueue_failed',   'queued',         'enqueue_failed', false),
        ('recovered',        'enqueue_failed', 'queued',         false),
        ('claimed',          'queued',         'processing',     true),
        ('completed',        'processing',     'done',           false),
        ('retried',          'processing',     'queued',         true),
        ('reaped',           'processing',     'queued',         true),
        ('timed_out',        'processing',     'queued',         true),
        ('snoozed',          'processing',     'queued',         true),
        ('exhausted',        'processing',     'failed',         false),
        ('exhausted',        'queued',         'failed',         false),
        ('exhausted',        'enqueue_failed', 'failed',         false),
        ('failed',           'processing',     'failed',         false),
        ('cancel_requested', 'processing',     'processing',     false),
        ('cancelled',        'processing',     'failed',         false),
        ('cancelled',        'queued',         'failed',         false),
        ('cancelled',        'enqueue_failed', 'failed',         false),
        ('replayed',         'failed',         'queued',         true),
        -- Dependencies: the last unmet one ended (the job may run), or one failed under fail.
        ('released',          'queued',         'queued',         false),
        ('dependency_failed', 'queued',         'failed',         false),
        ('dependency_failed', 'enqueue_failed', 'failed',         false)
      ) AS t(reason, from_status, to_status, bumps);
END $$;
COMMENT ON FUNCTION jobs.transitions() IS
    'The legal transitions: (reason, from_status, to_status, bumps_lease_version) for every event a jobs function may write. from_status NULL: a new job.';
REVOKE ALL ON FUNCTION jobs.transitions() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jobs.transitions() TO jobs_producer, jobs_worker, jobs_admin;
COMMIT;
