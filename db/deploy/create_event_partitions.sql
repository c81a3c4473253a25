-- Deploy jobfence:create_event_partitions to pg
-- requires: event
BEGIN;
-- The reaper calls this every minute, so the day partitions exist days before a transition
-- needs them; one that is still missing sends its events to jobs.event_default, never an
-- error. Idempotent, and one caller at a time: several reapers find the work done.
CREATE OR REPLACE FUNCTION jobs.create_event_partitions(ahead interval DEFAULT '3 days')
RETURNS integer
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
DECLARE
    -- Creating a partition takes an exclusive lock on jobs.event: waiting behind a long
    -- reader would queue every transition behind it, so give up quickly and retry next call.
    lock_wait constant text := '200ms';
    saved_lock_timeout constant text := current_setting('lock_timeout');
    day timestamptz := date_trunc('day', now(), 'UTC');
    last_day constant timestamptz := date_trunc('day', now() + ahead, 'UTC');
    name text;
    created integer := 0;
BEGIN
    IF ahead IS NULL OR ahead < interval '0' OR ahead > interval '90 days' THEN
        RAISE EXCEPTION 'jobs.create_event_partitions: ahead must be a non-negative interval of at most 90 days'
            USING ERRCODE = '22023', HINT = 'E.g. ''3 days'': the partitions of today and the next three days.';
    END IF;
    PERFORM pg_advisory_xact_lock(hashtext('jobs.event partitions'));
    PERFORM set_config('lock_timeout', lock_wait, true);
    WHILE day <= last_day LOOP
        name := 'event_' || to_char(day AT TIME ZONE 'UTC', 'YYYYMMDD');
        IF to_regclass('jobs.' || name) IS NULL THEN
            -- Rows of that day already in the default partition would make the new partition's
            -- range overlap them: that day stays in the default partition (docs/operations.md).
            IF EXISTS (SELECT 1 FROM jobs.event_default AS e WHERE e.at >= day AND e.at < day + interval '24 hours') THEN
                RAISE WARNING 'jobs.create_event_partitions: events of % are in jobs.event_default already; that day stays there (jobs.prune deletes them with their jobs)', to_char(day AT TIME ZONE 'UTC', 'YYYY-MM-DD');
            ELSE
                BEGIN
                    EXECUTE format('CREATE TABLE jobs.%I PARTITION OF jobs.event FOR VALUES FROM (%L) TO (%L)',
                                   name, to_char(day AT TIME ZONE 'UTC', 'YYYY-MM-DD "00:00:00+00"'),
                                   to_char((day + interval '24 hours') AT TIME ZONE 'UTC', 'YYYY-MM-DD "00:00:00+00"'));
                    EXECUTE format('REVOKE ALL ON jobs.%I FROM PUBLIC', name);
                    EXECUTE format('COMMENT ON TABLE jobs.%I IS %L', name,
                                   'Events of ' || to_char(day AT TIME ZONE 'UTC', 'YYYY-MM-DD') || ' (UTC). Dropped whole by jobs.drop_event_partitions.');
                    created := created + 1;
                EXCEPTION WHEN lock_not_available THEN
                    RAISE WARNING 'jobs.create_event_partitions: jobs.event busy, % not created yet (the next call tries again)', name;
                    EXIT;
                END;
            END IF;
        END IF;
        day := day + interval '24 hours';
    END LOOP;
    PERFORM set_config('lock_timeout', saved_lock_timeout, true);
    RETURN created;
END $$;
COMMENT ON FUNCTION jobs.create_event_partitions(interval) IS
    'Create the missing day partitions of jobs.event (UTC days) from today through now() + ahead. Idempotent; several callers serialise. Returns the number created. Called by the reaper every minute.';
REVOKE ALL ON FUNCTION jobs.create_event_partitions(interval) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jobs.create_event_partitions(interval) TO jobs_admin;
-- A fresh database has its partitions before the first reaper starts.
DO $$ BEGIN PERFORM jobs.create_event_partitions(); END $$;
COMMIT;
