-- Deploy jobfence:drop_event_partitions to pg
-- requires: event
-- requires: job
-- requires: create_event_partitions
BEGIN;
-- Retention of the history: a day partition goes whole once it is entirely older than the
-- cutoff and no job still in jobs.job has an event in it (jobs.prune deleted them all), so a
-- kept job always keeps its whole history. Partitions go in any order: one long-lived job
-- keeps only the days it has events in. The default partition is never dropped.
CREATE OR REPLACE FUNCTION jobs.drop_event_partitions(older_than interval DEFAULT '7 days')
RETURNS integer
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
DECLARE
    -- DROP takes an exclusive lock on jobs.event for an instant, but waiting for it behind a
    -- long reader would queue every transition: give up quickly, the next call tries again.
    lock_wait constant text := '200ms';
    saved_lock_timeout constant text := current_setting('lock_timeout');
    cutoff timestamptz;
    part record;
    lowest bigint;
    highest bigint;
    pinned boolean;
    dropped integer := 0;
BEGIN
    IF older_than IS NULL OR older_than < interval '0' OR older_than > interval '100 years' THEN
        RAISE EXCEPTION 'jobs.drop_event_partitions: older_than must be a non-negative interval of at most 100 years'
            USING ERRCODE = '22023', HINT = 'The retention jobs.prune runs with, e.g. ''7 days''.';
    END IF;
    cutoff := now() - older_than;
    PERFORM pg_advisory_xact_lock(hashtext('jobs.event partitions'));
    PERFORM set_config('lock_timeout', lock_wait, true);
    FOR part IN
        SELECT b.rel, b.upper_bound
          FROM (SELECT c.oid::regclass AS rel,
                       (regexp_match(pg_get_expr(c.relpartbound, c.oid), 'TO \(''([^'']+)''\)'))[1]::timestamptz AS upper_bound
                  FROM pg_inherits AS i JOIN pg_class AS c ON c.oid = i.inhrelid
                 WHERE i.inhparent = 'jobs.event'::regclass) AS b
         WHERE b.upper_bound <= cutoff
         ORDER BY b.upper_bound
    LOOP
        BEGIN
            -- SHARE waits for the transactions still writing into this partition (only those
            -- that began before its end) and keeps new writers out while it is judged; readers
            -- and writers of other partitions go on.
            EXECUTE format('LOCK TABLE %s IN SHARE MODE', part.rel);
            EXECUTE format('SELECT min(e.job_id), max(e.job_id) FROM %s AS e', part.rel) INTO lowest, highest;
            pinned := false;
            IF lowest IS NOT NULL THEN
                -- The jobs left in the partition's id range, each probed in its (job_id, id)
                -- index: few in steady state (those older than the retention still kept).
                EXECUTE format('SELECT EXISTS (SELECT 1 FROM jobs.job AS j
                                                CROSS JOIN LATERAL (SELECT 1 FROM %s AS e WHERE e.job_id = j.id LIMIT 1) AS hit
                                                WHERE j.id BETWEEN $1 AND $2)', part.rel)
                   INTO pinned USING lowest, highest;
            END IF;
            IF NOT pinned THEN
                EXECUTE format('DROP TABLE %s', part.rel);
                dropped := dropped + 1;
            END IF;
        EXCEPTION WHEN lock_not_available OR deadlock_detected THEN
            RAISE WARNING 'jobs.drop_event_partitions: % busy, left for the next call', part.rel;
        END;
    END LOOP;
    PERFORM set_config('lock_timeout', saved_lock_timeout, true);
    RETURN dropped;
END $$;
COMMENT ON FUNCTION jobs.drop_event_partitions(interval) IS
    'Retention of the history: drop the day partitions of jobs.event entirely older than now() - older_than in which no remaining job has an event. Returns the number dropped. Called by the reaper after jobs.prune, with the same retention.';
REVOKE ALL ON FUNCTION jobs.drop_event_partitions(interval) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jobs.drop_event_partitions(interval) TO jobs_admin;
COMMIT;
