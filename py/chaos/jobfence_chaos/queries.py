"""The statements the chaos runner reads its verdict with. They read ``jobs.job``,
``jobs.history`` (every transition: the job rows' and ``jobs.event``'s, docs/design.md "What is
recorded where") and the workload's ``chaos.*`` tables directly: a checker of the history, on a
scratch database it owns, run as its administrator (the drivers' calls are in
``jobfence.sql``)."""

HELD_BY_WORKER = """
SELECT owned_by, count(*) AS n FROM jobs.job WHERE status = 'processing' GROUP BY owned_by
"""

COUNT_PARKED = """
SELECT count(DISTINCT job_id) AS n FROM jobs.history
 WHERE job_id = ANY (%(ids)s::bigint[]) AND to_status = 'enqueue_failed'
"""

# Matched on the application_name each process sets (jobfence.db.Database(name=...)).
TERMINATE_BACKENDS = """
SELECT application_name, count(*) FILTER (WHERE killed) AS n
  FROM (SELECT application_name, pg_terminate_backend(pid) AS killed
          FROM pg_stat_activity
         WHERE datname = current_database() AND pid <> pg_backend_pid()
           AND (application_name LIKE 'jobfence-worker%%'
                OR application_name IN ('jobfence-reaper', 'jobfence-relay'))) AS t
 GROUP BY application_name
"""

STATUS_COUNTS = "SELECT status::text AS status, count(*) AS n FROM jobs.job GROUP BY 1"

NOT_TERMINAL = "SELECT count(*) AS n FROM jobs.job WHERE status NOT IN ('done', 'failed')"

# Acknowledged ids with no row, or not terminal.
ACKED_NOT_DONE = """
SELECT a.id, j.status::text AS status
  FROM unnest(%(ids)s::bigint[]) AS a(id)
  LEFT JOIN jobs.job AS j ON j.id = a.id
 WHERE j.id IS NULL OR j.status NOT IN ('done', 'failed')
 ORDER BY a.id
"""

DUPLICATE_COMPLETIONS = """
SELECT job_id, count(*) AS n FROM jobs.history WHERE reason = 'completed'
 GROUP BY job_id HAVING count(*) > 1 ORDER BY job_id
"""

# Every transactional kind's rows: more than one per job is a duplicate effect; a row whose
# lease_version is not the accepted completion's is a stale attempt's write that escaped
# the fence; a done job of those kinds without its row lost its effect.
EFFECTS = """
WITH rows AS (
    SELECT job_id, lease_version FROM chaos.effect
    UNION ALL SELECT job_id, lease_version FROM chaos.fan_in
    UNION ALL SELECT job_id, lease_version FROM chaos.ordered_run
), per_job AS (
    SELECT job_id, count(*) AS n, min(lease_version) AS lease_version FROM rows GROUP BY job_id
), accepted AS (
    SELECT j.id, j.status::text AS status, e.lease_version
      FROM jobs.job AS j
      LEFT JOIN jobs.history AS e ON e.job_id = j.id AND e.reason = 'completed'
     WHERE j.kind IN ('chaos_effect', 'chaos_fanin', 'chaos_ordered')
)
SELECT coalesce(p.job_id, a.id) AS job_id, coalesce(p.n, 0) AS n, p.lease_version AS effect_version,
       a.status, a.lease_version AS completed_version
  FROM per_job AS p FULL JOIN accepted AS a ON a.id = p.job_id
 WHERE coalesce(p.n, 0) > 1
    OR (p.job_id IS NOT NULL AND (a.status IS DISTINCT FROM 'done'
                                  OR p.lease_version IS DISTINCT FROM a.lease_version))
    OR (p.job_id IS NULL AND a.status = 'done')
 ORDER BY 1
"""

EFFECT_ROWS = """
SELECT (SELECT count(*) FROM chaos.effect) AS effect, (SELECT count(*) FROM chaos.fan_in) AS fan_in,
       (SELECT count(*) FROM chaos.ordered_run) AS ordered
"""

# A coordinator must be claimed only after every child ended, and run (accepted) once.
FAN_IN = """
WITH c AS (
    SELECT id, status::text AS status FROM jobs.job WHERE kind = 'chaos_fanin'
), kids AS (
    SELECT k.parent_id, count(*) AS children,
           count(*) FILTER (WHERE k.status NOT IN ('done', 'failed')) AS unfinished,
           max(k.finished_at) AS last_child_end
      FROM jobs.job AS k WHERE k.parent_id IN (SELECT id FROM c) GROUP BY k.parent_id
), claims AS (
    SELECT e.job_id, min(e.at) FILTER (WHERE e.reason = 'claimed') AS first_claim,
           count(*) FILTER (WHERE e.reason = 'completed') AS completions
      FROM jobs.history AS e WHERE e.job_id IN (SELECT id FROM c) GROUP BY e.job_id
)
SELECT c.id, c.status, coalesce(k.children, 0) AS children, coalesce(k.unfinished, 0) AS unfinished,
       k.last_child_end, cl.first_claim, coalesce(cl.completions, 0) AS completions,
       (SELECT count(*) FROM chaos.fan_in AS f WHERE f.job_id = c.id) AS runs
  FROM c LEFT JOIN kids AS k ON k.parent_id = c.id LEFT JOIN claims AS cl ON cl.job_id = c.id
 ORDER BY c.id
"""

# Per ordering key: accepted runs in start order must be in id order, and a job's accepted
# attempt must start after every older job of its key ended.
ORDER_BY_START = """
SELECT ordering_key, job_id, prev_job FROM (
    SELECT ordering_key, job_id, lag(job_id) OVER (PARTITION BY ordering_key ORDER BY seq) AS prev_job
      FROM chaos.ordered_run) AS r
 WHERE prev_job >= job_id
"""
ORDER_BY_TIME = """
SELECT ordering_key, id, claimed_at, older_end FROM (
    SELECT ordering_key, id, status, claimed_at,
           max(finished_at) OVER (PARTITION BY ordering_key ORDER BY id
                                  ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS older_end
      FROM jobs.job WHERE ordering_key IS NOT NULL) AS o
 WHERE status = 'done' AND claimed_at < older_end
"""
ORDER_KEYS = """
SELECT count(DISTINCT ordering_key) AS keys, count(*) AS jobs FROM jobs.job WHERE ordering_key IS NOT NULL
"""

# Latency from when the job was due; a flaky job from its last retry's due time (its
# backoff is the policy, not a delay), a coordinator from its last child's end.
LATENCY = """
WITH kids AS (SELECT parent_id, max(finished_at) AS last_end FROM jobs.job
               WHERE parent_id IS NOT NULL GROUP BY parent_id)
SELECT extract(epoch FROM j.finished_at - CASE
           WHEN j.kind = 'chaos_flaky' THEN greatest(j.due_at, j.run_after)
           WHEN k.last_end IS NOT NULL THEN greatest(j.due_at, k.last_end)
           ELSE j.due_at END)::float8 AS seconds
  FROM jobs.job AS j LEFT JOIN kids AS k ON k.parent_id = j.id
 WHERE j.finished_at IS NOT NULL
"""

# From a fault at T (and its end): the first job done after it was lifted, and when every
# job that was due and unfinished at T had ended.
RECOVERY = """
SELECT extract(epoch FROM (SELECT min(finished_at) FROM jobs.job
                            WHERE status = 'done' AND finished_at > to_timestamp(%(lifted)s))
               - to_timestamp(%(lifted)s))::float8 AS first_completion,
       extract(epoch FROM (SELECT max(finished_at) FROM jobs.job
                            WHERE due_at <= to_timestamp(%(at)s) AND finished_at > to_timestamp(%(at)s))
               - to_timestamp(%(at)s))::float8 AS drained,
       (SELECT count(*) FROM jobs.job WHERE due_at <= to_timestamp(%(at)s)
           AND (finished_at IS NULL OR finished_at > to_timestamp(%(at)s))) AS pending
"""

EVENT_COUNTS = """
SELECT reason, count(*) AS n FROM jobs.history
 WHERE reason IN ('reaped', 'timed_out', 'enqueue_failed', 'recovered', 'retried', 'failed')
 GROUP BY reason
"""

CHILDREN_OF = "SELECT count(*) AS n FROM jobs.job WHERE parent_id = ANY (%(ids)s::bigint[])"
ALL_JOBS = "SELECT count(*) AS n FROM jobs.job"
