-- Deploy jobfence:skip_ticks to pg
-- requires: schedule_table
BEGIN;
-- The ticker's other call: ticks up to `through` are handled without a job (the skip policy
-- after downtime), and the next tick it computed is recorded. With `through` at or before
-- ticked_through it only records next_tick, which is how a new schedule gets its first one.
CREATE OR REPLACE FUNCTION jobs.skip_ticks(name text, through timestamptz, next_tick timestamptz DEFAULT NULL)
RETURNS SETOF jobs.schedule
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
BEGIN
    IF skip_ticks.name IS NULL THEN
        RAISE EXCEPTION 'jobs.skip_ticks: name must not be NULL'
            USING ERRCODE = '22023', HINT = 'Pass the name of a schedule (jobs.schedules()).';
    END IF;
    IF skip_ticks.through IS NULL OR NOT isfinite(skip_ticks.through) OR skip_ticks.through > now() THEN
        RAISE EXCEPTION 'jobs.skip_ticks: through must be an instant not after now(), got %', coalesce(skip_ticks.through::text, 'NULL')
            USING ERRCODE = '22023', HINT = 'Only ticks that are due can be skipped; compute them against the database''s now().';
    END IF;
    IF skip_ticks.next_tick IS NOT NULL AND (NOT isfinite(skip_ticks.next_tick) OR skip_ticks.next_tick <= skip_ticks.through) THEN
        RAISE EXCEPTION 'jobs.skip_ticks: next_tick must be after through, got %', skip_ticks.next_tick
            USING ERRCODE = '22023', HINT = 'Pass the first tick of the timetable after through, or NULL.';
    END IF;
    -- Both instants only move forward, whatever order concurrent tickers arrive in.
    RETURN QUERY
    UPDATE jobs.schedule AS s
       SET ticked_through = greatest(s.ticked_through, skip_ticks.through),
           next_tick = CASE WHEN greatest(skip_ticks.next_tick, s.next_tick) > greatest(s.ticked_through, skip_ticks.through)
                            THEN greatest(skip_ticks.next_tick, s.next_tick) END
     WHERE s.name = skip_ticks.name
    RETURNING s.*;
END $$;
COMMENT ON FUNCTION jobs.skip_ticks(text, timestamptz, timestamptz) IS
    'The ticker''s call for ticks that enqueue nothing: mark every tick up to through (not after now()) handled and record next_tick; both only move forward. Zero rows for an unknown name.';
REVOKE ALL ON FUNCTION jobs.skip_ticks(text, timestamptz, timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jobs.skip_ticks(text, timestamptz, timestamptz) TO jobs_admin;
COMMIT;
