-- Deploy jobfence:audit to pg
-- requires: job
-- requires: event
-- requires: transitions
-- requires: history
BEGIN;
-- The invariants of docs/reliability.md checked over the recorded history, on a live
-- database: every job's events are a legal path of jobs.transitions() (the same table the
-- functions follow), each lease_version is its predecessor's plus what the transition bumps,
-- at most one accepted completion per job, the row agrees with its last event, and no lease
-- outlives its expiry by more than two reaper intervals. One pass over jobs.history (what the
-- job rows record and jobs.event's rows) in (job_id, id) order and one over the unfinished
-- jobs; read-only.
CREATE OR REPLACE FUNCTION jobs.audit(reaper_interval interval DEFAULT '5 seconds', examples integer DEFAULT 10)
RETURNS TABLE (check_name text, violations bigint, example_job_ids bigint[], description text)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
BEGIN
    IF reaper_interval IS NULL OR reaper_interval <= interval '0' OR reaper_interval > interval '1 day' THEN
        RAISE EXCEPTION 'jobs.audit: reaper_interval must be a positive interval of at most a day'
            USING ERRCODE = '22023', HINT = 'Pass the --interval your reapers run with, e.g. ''5 seconds''.';
    END IF;
    IF examples IS NULL OR examples NOT BETWEEN 0 AND 1000 THEN
        RAISE EXCEPTION 'jobs.audit: examples must be between 0 and 1000'
            USING ERRCODE = '22023', HINT = 'The number of job ids listed per violated check.';
    END IF;
    RETURN QUERY
    WITH legal AS (
        SELECT t.reason, t.from_status, t.to_status, t.bumps_lease_version FROM jobs.transitions() AS t
    ), history AS (
        SELECT e.job_id, e.at, e.reason, e.from_status, e.to_status, e.lease_version,
               lag(e.to_status) OVER w AS prev_status, lag(e.lease_version) OVER w AS prev_version,
               row_number() OVER w = 1 AS first, lead(e.id) OVER w IS NULL AS last
          FROM jobs.history AS e
        WINDOW w AS (PARTITION BY e.job_id ORDER BY e.id)
    ), judged AS (
        SELECT h.*, l.reason IS NOT NULL AS is_legal,
               CASE WHEN h.first THEN h.from_status IS NULL
                    ELSE h.from_status IS NOT DISTINCT FROM h.prev_status END AS chained,
               CASE WHEN h.first THEN h.lease_version = 0
                    WHEN l.reason IS NULL THEN true   -- judged by legal_transitions alone
                    ELSE h.lease_version = h.prev_version + CASE WHEN l.bumps_lease_version THEN 1 ELSE 0 END END AS versioned
          FROM history AS h
          LEFT JOIN legal AS l ON l.reason = h.reason AND l.to_status = h.to_status
                              AND l.from_status IS NOT DISTINCT FROM h.from_status
    ), per_job AS (
        SELECT j.job_id, bool_and(j.is_legal) AS legal, bool_and(j.chained) AS chained,
               bool_and(j.versioned) AS versioned,
               count(*) FILTER (WHERE j.reason = 'completed') AS completions,
               min(j.to_status::text) FILTER (WHERE j.last) AS last_status,
               min(j.lease_version) FILTER (WHERE j.last) AS last_version,
               max(j.at) AS last_at
          FROM judged AS j
         GROUP BY j.job_id
    ), rows_vs_history AS (
        SELECT coalesce(p.job_id, r.id) AS job_id, p.job_id IS NOT NULL AS has_history, r.id IS NOT NULL AS has_row,
               p.legal, p.chained, p.versioned, p.completions,
               (r.status::text IS NOT DISTINCT FROM p.last_status AND r.lease_version IS NOT DISTINCT FROM p.last_version) AS agrees
          FROM per_job AS p
          FULL JOIN jobs.job AS r ON r.id = p.job_id
         -- A history retention released: jobs.prune deleted its job, its partition is not
         -- dropped yet (jobs.event_retention, a later change of the plan, read per call).
         WHERE NOT (r.id IS NULL
                    AND p.last_at < coalesce((SELECT t.released_before FROM jobs.event_retention AS t), '-infinity'))
    ), stuck AS (
        SELECT s.id FROM jobs.job AS s
         WHERE s.status = 'processing' AND s.lease_expires_at < now() - 2 * reaper_interval
    ), findings AS (
        SELECT 'legal_transitions' AS c, v.job_id FROM rows_vs_history AS v WHERE v.has_history AND NOT v.legal
        UNION ALL SELECT 'chained_history', v.job_id FROM rows_vs_history AS v WHERE v.has_history AND NOT v.chained
        UNION ALL SELECT 'lease_versions', v.job_id FROM rows_vs_history AS v WHERE v.has_history AND NOT v.versioned
        UNION ALL SELECT 'one_completion', v.job_id FROM rows_vs_history AS v WHERE v.completions > 1
        UNION ALL SELECT 'row_matches_history', v.job_id FROM rows_vs_history AS v
                   WHERE v.has_row AND v.has_history AND NOT v.agrees
        UNION ALL SELECT 'history_of_every_job', v.job_id FROM rows_vs_history AS v WHERE v.has_row <> v.has_history
        UNION ALL SELECT 'leases_reaped', s.id FROM stuck AS s
    ), checks AS (
        SELECT c.name, c.about, c.ord FROM (VALUES
            ('legal_transitions', 'every event is a transition of jobs.transitions()', 1),
            ('chained_history', 'each event starts where the previous one ended; the first starts a new job', 2),
            ('lease_versions', 'lease_version starts at 0 and grows exactly by what each transition bumps', 3),
            ('one_completion', 'at most one accepted completion per job', 4),
            ('row_matches_history', 'the job''s status and lease_version are those of its last event', 5),
            ('history_of_every_job', 'every history has its job (a job''s submission is its row, so every job has one)', 6),
            ('leases_reaped', 'no lease outlives its expiry by more than two reaper intervals', 7)) AS c(name, about, ord)
    )
    SELECT k.name, count(f.job_id),
           coalesce((array_agg(f.job_id ORDER BY f.job_id) FILTER (WHERE f.job_id IS NOT NULL))[1:examples], '{}'),
           k.about
      FROM checks AS k
      LEFT JOIN findings AS f ON f.c = k.name
     GROUP BY k.name, k.about, k.ord
     ORDER BY k.ord;
END $$;
COMMENT ON FUNCTION jobs.audit(interval, integer) IS
    'Check the invariants over jobs.job and jobs.history (what the job rows record and jobs.event''s rows): one row per check with the number of violating jobs and some of their ids. Read-only. Granted to jobs_admin.';
REVOKE ALL ON FUNCTION jobs.audit(interval, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jobs.audit(interval, integer) TO jobs_admin;
COMMIT;
