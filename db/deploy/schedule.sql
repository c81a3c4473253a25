-- Deploy jobfence:schedule to pg
-- requires: schedule_table
-- requires: job_type
BEGIN;
-- Create or replace a periodic job. The cron text gets a cheap syntactic check here (fields,
-- characters, value ranges); the ticker parses it fully, and the Python drivers parse it
-- before they call. Redefining a schedule with the same timetable keeps its position
-- (ticked_through), so a worker that upserts its app's schedules at every start never
-- makes a tick run twice or be lost.
CREATE OR REPLACE FUNCTION jobs.schedule(
    name     text,
    cron     text,
    kind     text,
    payload  jsonb DEFAULT '{}',
    timezone text DEFAULT 'UTC',
    missed   text DEFAULT 'once',
    enabled  boolean DEFAULT NULL)
RETURNS jobs.schedule
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
DECLARE
    problem text;
    fields text[];
    field_names text[];
    lows integer[];
    highs integer[];
    allowed text[];
    f text;
    i integer;
    value numeric;
    step text;
    body jsonb := coalesce(schedule.payload, '{}');
    declared jobs.job_type;
    timetable text;
    wanted_enabled boolean := schedule.enabled;
    stored jobs.schedule;
BEGIN
    problem := CASE
        WHEN schedule.name IS NULL OR schedule.name !~ '^[A-Za-z0-9][A-Za-z0-9_.:/-]{0,127}$' THEN
            format('name %s is malformed', coalesce(quote_literal(schedule.name), 'NULL'))
        WHEN schedule.kind IS NULL OR schedule.kind !~ '^[A-Za-z0-9][A-Za-z0-9_.:/-]{0,127}$' THEN
            format('kind %s is malformed', coalesce(quote_literal(schedule.kind), 'NULL'))
        WHEN schedule.cron IS NULL OR btrim(schedule.cron) = '' THEN 'cron must be a cron text, got ' || coalesce(quote_literal(schedule.cron), 'NULL')
        WHEN octet_length(schedule.cron) > 200 THEN 'cron is longer than 200 bytes'
        WHEN schedule.missed IS NULL OR schedule.missed NOT IN ('once', 'skip') THEN
            format('missed must be ''once'' or ''skip'', got %s', coalesce(quote_literal(schedule.missed), 'NULL'))
        WHEN jsonb_typeof(body) <> 'object' THEN format('payload must be a JSON object, got %s', jsonb_typeof(body))
        WHEN schedule.timezone IS NULL
          OR NOT EXISTS (SELECT 1 FROM pg_catalog.pg_timezone_names AS z WHERE z.name = schedule.timezone) THEN
            format('timezone %s is not a time zone name of pg_timezone_names', coalesce(quote_literal(schedule.timezone), 'NULL'))
    END;
    IF problem IS NOT NULL THEN
        RAISE EXCEPTION 'jobs.schedule: %', problem
            USING ERRCODE = '22023',
                  HINT = 'Names: 1-128 of A-Z a-z 0-9 _ . : / - starting with a letter or digit; cron: 5 fields (minute hour day-of-month month day-of-week) or 6 with seconds first; timezone: e.g. ''UTC'', ''Europe/Paris''; missed: once or skip.';
    END IF;

    -- The cheap check: field count, characters per field and the ranges of plain values
    -- (numbers not following / or #). Steps must be positive. Names (JAN, MON) and L, W, #
    -- are left to the cron parser.
    fields := regexp_split_to_array(btrim(schedule.cron), '\s+');
    IF cardinality(fields) = 6 THEN
        field_names := ARRAY['second', 'minute', 'hour', 'day of month', 'month', 'day of week'];
        lows := ARRAY[0, 0, 0, 1, 1, 0];
        highs := ARRAY[59, 59, 23, 31, 12, 7];
        allowed := ARRAY['^[0-9*/,-]+$', '^[0-9*/,-]+$', '^[0-9*/,-]+$', '^[0-9*/,LW-]+$',
                         '^[0-9A-Za-z*/,-]+$', '^[0-9A-Za-z*/,#-]+$'];
    ELSIF cardinality(fields) = 5 THEN
        field_names := ARRAY['minute', 'hour', 'day of month', 'month', 'day of week'];
        lows := ARRAY[0, 0, 1, 1, 0];
        highs := ARRAY[59, 23, 31, 12, 7];
        allowed := ARRAY['^[0-9*/,-]+$', '^[0-9*/,-]+$', '^[0-9*/,LW-]+$',
                         '^[0-9A-Za-z*/,-]+$', '^[0-9A-Za-z*/,#-]+$'];
    ELSE
        problem := format('cron %s has %s fields, expected 5 (minute hour day-of-month month day-of-week) or 6 (seconds first)',
                          quote_literal(schedule.cron), cardinality(fields));
    END IF;
    IF problem IS NULL THEN
        FOR i IN 1 .. cardinality(fields) LOOP
            f := fields[i];
            IF f !~ allowed[i] THEN
                problem := format('cron field %s (%s) %s holds a character a %s field cannot have',
                                  i, field_names[i], quote_literal(f), field_names[i]);
                EXIT;
            END IF;
            FOR value IN SELECT m[2]::numeric FROM regexp_matches(f, '(^|[^/#0-9])([0-9]+)', 'g') AS m LOOP
                IF value < lows[i] OR value > highs[i] THEN
                    problem := format('cron field %s (%s) %s: %s is outside %s-%s',
                                      i, field_names[i], quote_literal(f), value, lows[i], highs[i]);
                    EXIT;
                END IF;
            END LOOP;
            EXIT WHEN problem IS NOT NULL;
            FOR step IN SELECT m[1] FROM regexp_matches(f, '/([0-9]*)', 'g') AS m LOOP
                IF step = '' OR step::numeric < 1 OR step::numeric > highs[i] + 1 THEN
                    problem := format('cron field %s (%s) %s: a step must be a number from 1 to %s',
                                      i, field_names[i], quote_literal(f), highs[i] + 1);
                    EXIT;
                END IF;
            END LOOP;
            EXIT WHEN problem IS NOT NULL;
        END LOOP;
    END IF;
    IF problem IS NOT NULL THEN
        RAISE EXCEPTION 'jobs.schedule: %', problem
            USING ERRCODE = '22023',
                  HINT = 'E.g. ''*/5 * * * *'' (every 5 minutes), ''0 3 * * MON'' (Mondays at 03:00), ''*/10 * * * * *'' (every 10 seconds).';
    END IF;
    timetable := array_to_string(fields, ' ');

    -- The same limits as a submit of the kind, so that no tick fails on its payload later.
    SELECT * INTO declared FROM jobs.job_type AS t WHERE t.kind = schedule.kind;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'jobs.schedule: unknown kind %', quote_literal(schedule.kind)
            USING ERRCODE = 'JB005', HINT = 'Declare it first: SELECT jobs.define_type(''<kind>'', ...).';
    END IF;
    IF octet_length(body::text) > declared.max_payload_bytes THEN
        RAISE EXCEPTION 'jobs.schedule: payload of % bytes exceeds the % byte limit of kind %',
            octet_length(body::text), declared.max_payload_bytes, declared.kind
            USING ERRCODE = 'JB004',
                  HINT = 'Pass a reference (an id or an object-storage key) and load the data when the job runs.';
    END IF;
    IF jsonb_path_exists(body, 'strict $.**{64} ? (@.type() == "object" || @.type() == "array")') THEN
        RAISE EXCEPTION 'jobs.schedule: payload is nested deeper than 64 levels'
            USING ERRCODE = 'JB004',
                  HINT = 'Flatten the payload, or pass a reference (an id or an object-storage key) and load the data when the job runs.';
    END IF;
    IF octet_length(body::text) >= 309 AND body::text ~ '[0-9]{255}'
       AND jsonb_path_exists(body, 'strict $.**{0 to 1000} ? (@.type() == "number" && (@ > 1.7976931348623157e308 || @ < -1.7976931348623157e308))') THEN
        RAISE EXCEPTION 'jobs.schedule: payload holds a number beyond the IEEE-754 double range (greater than 1.7976931348623157e308 in magnitude)'
            USING ERRCODE = '22003',
                  HINT = 'JSON readers (JavaScript, Python, Go, ...) cannot decode it: send such a number as a string, e.g. {"n": "1e400"}.';
    END IF;

    -- A new timetable, or a schedule enabled again, starts from now: the ticks it would have
    -- had before do not count as missed. An unchanged definition writes nothing.
    INSERT INTO jobs.schedule AS s (name, cron, kind, payload, timezone, missed, enabled)
    VALUES (schedule.name, timetable, schedule.kind, body, schedule.timezone, schedule.missed,
            coalesce(wanted_enabled, true))
    ON CONFLICT ON CONSTRAINT schedule_pkey DO UPDATE
       SET cron = excluded.cron, kind = excluded.kind, payload = excluded.payload,
           timezone = excluded.timezone, missed = excluded.missed,
           enabled = coalesce(wanted_enabled, s.enabled),
           ticked_through = CASE
               WHEN s.cron <> excluded.cron OR s.timezone <> excluded.timezone
                 OR (NOT s.enabled AND coalesce(wanted_enabled, s.enabled))
               THEN greatest(s.ticked_through, now()) ELSE s.ticked_through END,
           next_tick = CASE
               WHEN s.cron <> excluded.cron OR s.timezone <> excluded.timezone
                 OR (NOT s.enabled AND coalesce(wanted_enabled, s.enabled))
               THEN NULL ELSE s.next_tick END,
           updated_at = now()
     WHERE (s.cron, s.kind, s.payload, s.timezone, s.missed, s.enabled)
           IS DISTINCT FROM (excluded.cron, excluded.kind, excluded.payload, excluded.timezone,
                             excluded.missed, coalesce(wanted_enabled, s.enabled))
    RETURNING * INTO stored;
    IF NOT FOUND THEN
        SELECT * INTO stored FROM jobs.schedule AS s WHERE s.name = schedule.name;
    END IF;
    RETURN stored;
END $$;
COMMENT ON FUNCTION jobs.schedule(text, text, text, jsonb, text, text, boolean) IS
    'Create or replace the periodic job name: a job of kind with payload at each tick of cron (5 fields, or 6 with seconds first) in timezone; missed ticks after downtime: once (the latest) or skip. enabled NULL keeps the stored value (true for a new schedule). Returns the stored row.';
REVOKE ALL ON FUNCTION jobs.schedule(text, text, text, jsonb, text, text, boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jobs.schedule(text, text, text, jsonb, text, text, boolean) TO jobs_admin;
COMMIT;
