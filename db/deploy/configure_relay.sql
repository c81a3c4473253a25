-- Deploy jobfence:configure_relay to pg
-- requires: relay_feed
-- requires: jobs_admin
BEGIN;
-- The one way to choose how submits reach the relay. Switching to table starts the reading
-- at the last id drawn now: a submit that does not notify read the source as table when it
-- began, after this commit, so it draws a later id (jobs.insert_jobs reads the source before
-- it draws ids). Switching back leaves the reading in place until jobs.poll_submitted has
-- read what submits that still saw table drew.
CREATE OR REPLACE FUNCTION jobs.configure_relay(source text DEFAULT NULL)
RETURNS TABLE (relay_source text, read_upto bigint, changed_at timestamptz)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    last_id bigint;
BEGIN
    IF configure_relay.source IS NOT NULL AND configure_relay.source NOT IN ('notify', 'table') THEN
        RAISE EXCEPTION 'jobs.configure_relay: source must be notify or table, not %', configure_relay.source
              USING ERRCODE = '22023',
                    HINT = 'notify: submits send pg_notify on commit; table: the relay reads new jobs from jobs.job.';
    END IF;
    IF configure_relay.source IS NOT NULL THEN
        -- The lock jobs.poll_submitted tries: a switch waits for a poll in progress, and
        -- another switch, so each reads the row the other left.
        PERFORM pg_advisory_xact_lock(hashtext('jobs.relay_feed'));
        SELECT CASE WHEN s.is_called THEN s.last_value ELSE s.last_value - 1 END
          INTO last_id FROM jobs.job_id_seq AS s;
        UPDATE jobs.relay_feed AS f
           SET source = configure_relay.source,
               read_upto = CASE WHEN configure_relay.source = 'table' THEN coalesce(f.read_upto, last_id)
                                ELSE f.read_upto END,
               changed_at = now()
         WHERE f.singleton AND f.source IS DISTINCT FROM configure_relay.source;
    END IF;
    RETURN QUERY SELECT f.source, f.read_upto, f.changed_at FROM jobs.relay_feed AS f;
END $$;
COMMENT ON FUNCTION jobs.configure_relay(text) IS
    'Read or change how submits reach the relay: notify (pg_notify on commit, the default) or table (submits send nothing; jobfence relay reads new jobs with jobs.poll_submitted, sparing many concurrent producers the serialised notifying commit). NULL keeps the setting; returns it with how far the table has been read (read_upto, NULL once nothing is left to read). Granted to jobs_admin.';
REVOKE ALL ON FUNCTION jobs.configure_relay(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jobs.configure_relay(text) TO jobs_admin;
COMMIT;
