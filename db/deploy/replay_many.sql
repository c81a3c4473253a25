-- Deploy jobfence:replay_many to pg
-- requires: job
-- requires: signal
-- requires: requeue_failed
BEGIN;
-- Bulk dead-letter re-drive: after a fix ships, the failed jobs of a kind (or of one error)
-- go back to queued in one transaction. Bounded by max_jobs, oldest failure first; rows
-- another transaction holds are skipped rather than waited for, so a re-drive never stalls
-- behind a running cancel or a second re-drive (the next call takes what is left).
CREATE OR REPLACE FUNCTION jobs.replay_many(kind text, error_like text DEFAULT NULL,
                                            failed_since timestamptz DEFAULT NULL, max_jobs integer DEFAULT 1000)
RETURNS SETOF jobs.signal
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    picked bigint[];
BEGIN
    IF max_jobs IS NULL OR max_jobs < 1 OR max_jobs > 10000 THEN
        RAISE EXCEPTION 'jobs.replay_many: max_jobs must be between 1 and 10000, got %', coalesce(max_jobs::text, 'NULL')
            USING ERRCODE = '22023', HINT = 'Replay larger sets in several calls: each takes the next slice.';
    END IF;
    -- Refused before any row is read, so the answer does not depend on what has failed: a
    -- kind no kind can have matches nothing (the names define_type accepts), and LIKE raises
    -- 22025 for a pattern ending in its escape character only once it compares an error
    -- that far.
    IF kind !~ '^[A-Za-z0-9][A-Za-z0-9_.:/-]{0,127}$' THEN
        RAISE EXCEPTION 'jobs.replay_many: kind % is malformed', quote_literal(left(kind, 200))
            USING ERRCODE = '22023',
                  HINT = 'Kind names are 1-128 of A-Z a-z 0-9 _ . : / - starting with a letter or digit.';
    END IF;
    IF octet_length(error_like) > 4096 THEN
        RAISE EXCEPTION 'jobs.replay_many: error_like is % bytes, over the limit of 4096', octet_length(error_like)
            USING ERRCODE = '22023', HINT = 'Match a distinctive part of the error, e.g. ''%timeout%''.';
    END IF;
    -- Backslashes pair up from the left of a run: an odd run at the end escapes nothing.
    IF (length(error_like) - length(rtrim(error_like, E'\\'))) % 2 = 1 THEN
        RAISE EXCEPTION 'jobs.replay_many: error_like ends with the escape character \, which escapes nothing'
            USING ERRCODE = '22023',
                  HINT = 'In a LIKE pattern a backslash escapes the character after it: write \\ for a literal backslash, \% and \_ for a literal % and _.';
    END IF;
    -- job_failed_idx holds only the failed jobs, however many are done.
    picked := ARRAY(
        SELECT j.id
          FROM jobs.job AS j
         WHERE j.status = 'failed'
           AND (replay_many.kind IS NULL OR j.kind = replay_many.kind)
           AND (replay_many.error_like IS NULL OR j.error LIKE replay_many.error_like)
           AND (replay_many.failed_since IS NULL OR j.finished_at >= replay_many.failed_since)
         ORDER BY j.finished_at, j.id
         LIMIT max_jobs
           FOR UPDATE SKIP LOCKED);
    IF cardinality(picked) = 0 THEN
        RETURN;
    END IF;
    RETURN QUERY SELECT * FROM jobs.requeue_failed(picked);
END $$;
COMMENT ON FUNCTION jobs.replay_many(text, text, timestamptz, integer) IS
    'Bulk dead-letter re-drive in one transaction: up to max_jobs (1-10000) failed jobs of kind (NULL: every kind) whose error matches error_like (LIKE; NULL: any) and that failed at or after failed_since (NULL: any time), oldest failure first, go back to queued as jobs.replay does; returns one row per re-queued job (signal them through jobs.signals, which leaves out a coordinator that waits for a child replayed with it). 22023 for max_jobs out of range, a malformed kind, an error_like over 4096 bytes or ending in a lone escape character.';
REVOKE ALL ON FUNCTION jobs.replay_many(text, text, timestamptz, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jobs.replay_many(text, text, timestamptz, integer) TO jobs_admin;
COMMIT;
