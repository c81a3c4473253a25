-- Deploy jobfence:enqueue_tick to pg
-- requires: schedule_table
-- requires: insert_jobs
-- requires: key_owner
BEGIN;
-- One tick of a schedule, exactly once however many tickers call it: the schedule's row is
-- locked, so concurrent callers take turns and the later ones find the tick handled; and the
-- job's idempotency key (schedule:<name>:<tick in UTC>) keeps a tick to one job even across
-- an unschedule and a schedule of the same name. The job goes through insert_jobs, as a
-- submit does: same limits, same submitted event.
CREATE OR REPLACE FUNCTION jobs.enqueue_tick(name text, tick timestamptz, next_tick timestamptz DEFAULT NULL)
RETURNS TABLE (job_id bigint, created boolean, queue text, run_after timestamptz, signal boolean)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
DECLARE
    s jobs.schedule;
    key text;
    made_id bigint;
    made_queue text;
    made_run_after timestamptz;
    made_now boolean;
    ahead timestamptz;
BEGIN
    IF enqueue_tick.name IS NULL THEN
        RAISE EXCEPTION 'jobs.enqueue_tick: name must not be NULL'
            USING ERRCODE = '22023', HINT = 'Pass the name of a schedule (jobs.schedules()).';
    END IF;
    -- A tick ahead of the database's clock would run early: tickers compute ticks from now().
    IF enqueue_tick.tick IS NULL OR NOT isfinite(enqueue_tick.tick) OR enqueue_tick.tick > now() THEN
        RAISE EXCEPTION 'jobs.enqueue_tick: tick must be an instant not after now(), got %', coalesce(enqueue_tick.tick::text, 'NULL')
            USING ERRCODE = '22023', HINT = 'Enqueue ticks once they are due; compute them against the database''s now().';
    END IF;
    IF enqueue_tick.next_tick IS NOT NULL AND (NOT isfinite(enqueue_tick.next_tick) OR enqueue_tick.next_tick <= enqueue_tick.tick) THEN
        RAISE EXCEPTION 'jobs.enqueue_tick: next_tick must be after tick, got %', enqueue_tick.next_tick
            USING ERRCODE = '22023', HINT = 'Pass the first tick of the timetable after tick, or NULL.';
    END IF;

    SELECT * INTO s FROM jobs.schedule AS x WHERE x.name = enqueue_tick.name FOR UPDATE;
    IF NOT FOUND THEN
        RETURN;   -- unscheduled meanwhile: nothing to enqueue
    END IF;
    key := format('schedule:%s:%s', s.name, to_char(enqueue_tick.tick AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'));

    IF enqueue_tick.tick <= s.ticked_through THEN
        -- Handled already, by another ticker or by the missed policy: answer its job, if any
        -- (none when the tick was skipped, or its job was pruned).
        RETURN QUERY SELECT j.id, false, j.queue, j.run_after, false
                       FROM jobs.job AS j
                      WHERE j.kind = s.kind AND j.idempotency_key = key
                        AND j.key_owner IS NOT DISTINCT FROM jobs.key_owner();
        IF NOT FOUND THEN
            RETURN QUERY SELECT NULL::bigint, false, NULL::text, NULL::timestamptz, false;
        END IF;
        RETURN;
    END IF;

    SELECT (r.job).id, (r.job).queue, (r.job).run_after, r.created
      INTO made_id, made_queue, made_run_after, made_now
      FROM jobs.insert_jobs('jobs.enqueue_tick',
               jsonb_build_array(jsonb_build_object('kind', s.kind, 'payload', s.payload,
                                                    'idempotency_key', key, 'notify', false)),
               NULL, true) AS r;

    -- next_tick only moves forward, and stays ahead of ticked_through (NULL until known).
    ahead := greatest(enqueue_tick.next_tick, s.next_tick);
    UPDATE jobs.schedule AS x
       SET ticked_through = enqueue_tick.tick, last_tick = enqueue_tick.tick, last_job_id = made_id,
           next_tick = CASE WHEN ahead > enqueue_tick.tick THEN ahead END
     WHERE x.name = s.name;
    RETURN QUERY SELECT made_id, made_now, made_queue, made_run_after, made_now;
END $$;
COMMENT ON FUNCTION jobs.enqueue_tick(text, timestamptz, timestamptz) IS
    'The ticker''s call: enqueue the job of schedule name for tick (not after now()), exactly once per tick (row lock + idempotency key schedule:<name>:<tick UTC>), and move ticked_through/last_tick/last_job_id/next_tick forward. One row (job_id NULL for a tick skipped or whose job was pruned); signal: push (job_id, queue, run_after) to Redis. Zero rows for an unknown name.';
REVOKE ALL ON FUNCTION jobs.enqueue_tick(text, timestamptz, timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jobs.enqueue_tick(text, timestamptz, timestamptz) TO jobs_admin;
COMMIT;
