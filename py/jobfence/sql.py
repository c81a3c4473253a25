"""Every SQL statement the drivers run, by name.

Nothing here but calls of ``jobs.*`` functions: the state machine lives in PostgreSQL, so a
driver that wanted to change a row would have to add a statement here, where review sees it.
Named parameters keep the calls readable and let the server's defaults apply. Array
parameters go in binary (``%(name)b``, each with an explicit cast): the text form quotes and
escapes every element, which for a batch of JSON results cost more client CPU than the rest
of reporting it.
"""

from __future__ import annotations

from psycopg import sql as _sql

# -- producer -------------------------------------------------------------------------------
# notify => false: the Python producer pushes the id itself after commit (docs/design.md §6).
SUBMIT = """
SELECT * FROM jobs.submit(kind => %(kind)s, payload => %(payload)s,
                          idempotency_key => %(idempotency_key)s, run_after => %(run_after)s,
                          ordering_key => %(ordering_key)s, notify => %(notify)s,
                          priority => %(priority)s, unique_while => %(unique_while)s::jobs.status[],
                          unique_for => %(unique_for)s::interval, debounce => %(debounce)s,
                          traceparent => %(traceparent)s, depends_on => %(depends_on)s::bigint[],
                          on_dependency_failure => %(on_dependency_failure)s,
                          concurrency_key => %(concurrency_key)s)
"""
SUBMIT_MANY = "SELECT * FROM jobs.submit_many(specs => %(specs)s)"
# The producer's hot path needs only where to push each job: five columns, not the whole row.
SUBMIT_MANY_SIGNALS = """
SELECT id, queue, run_after, status = 'queued' AND pending_children = 0 AS waits_for_signal, priority
  FROM jobs.submit_many(specs => %(specs)s)
"""
FAN_OUT = "SELECT * FROM jobs.fan_out(children => %(children)s, then_spec => %(then_spec)s)"
# The HTTP API tells a new job from an idempotent repeat: a row this statement inserted carries
# its transaction's now() as created_at, a repeat the created_at of an earlier transaction.
SUBMIT_CREATED = """
SELECT *, created_at = now() AS created
  FROM jobs.submit(kind => %(kind)s, payload => %(payload)s,
                   idempotency_key => %(idempotency_key)s, run_after => %(run_after)s,
                   ordering_key => %(ordering_key)s, notify => false,
                   priority => %(priority)s, unique_while => %(unique_while)s::jobs.status[],
                   unique_for => %(unique_for)s::interval, debounce => %(debounce)s,
                          traceparent => %(traceparent)s, depends_on => %(depends_on)s::bigint[],
                          on_dependency_failure => %(on_dependency_failure)s,
                          concurrency_key => %(concurrency_key)s)
"""
# A batch's answer needs where to push each job and what to report, not the whole row: decoding
# every column (payload, a dozen timestamps) of 1,000 rows was most of the API's time per batch.
# A key repeated inside the batch returns the same new row for every copy, and only the first
# copy created it (jobs.insert_jobs inserts in spec order; the later copies meet its key).
SUBMIT_MANY_CREATED = """
SELECT id, kind, queue, status::text, run_after, priority, pending_children,
       created_at = now() AND ordinality = min(ordinality) OVER (PARTITION BY id) AS created
  FROM jobs.submit_many(specs => %(specs)s) WITH ORDINALITY
 ORDER BY ordinality
"""
FAN_OUT_CREATED = """
SELECT *, created_at = now() AS created
  FROM jobs.fan_out(children => %(children)s, then_spec => %(then_spec)s)
"""
MARK_ENQUEUE_FAILED = "SELECT jobs.mark_enqueue_failed(job_ids => %(job_ids)b::bigint[]) AS marked"

# -- worker ---------------------------------------------------------------------------------
CLAIM_MANY = """
SELECT * FROM jobs.claim_many(job_ids => %(job_ids)b::bigint[], worker => %(worker)s,
                              queues => %(queues)s::text[])
"""
HEARTBEAT = """
SELECT * FROM jobs.heartbeat(job_id => %(job_id)s, worker => %(worker)s,
                             lease_version => %(lease_version)s)
"""
COMPLETE = """
SELECT * FROM jobs.complete(job_id => %(job_id)s, worker => %(worker)s,
                            lease_version => %(lease_version)s, result => %(result)s)
"""
COMPLETE_MANY = """
SELECT * FROM jobs.complete_many(job_ids => %(job_ids)b::bigint[], worker => %(worker)s,
                                 lease_versions => %(lease_versions)b::bigint[],
                                 results => %(results)b::jsonb[])
"""
# Batched outcomes and lease refresh: one round trip per batch (docs/sql-api.md).
FAIL_MANY = """
SELECT * FROM jobs.fail_many(job_ids => %(job_ids)b::bigint[], worker => %(worker)s,
                             lease_versions => %(lease_versions)b::bigint[],
                             errors => %(errors)b::text[], retryable => %(retryable)b::boolean[])
"""
HEARTBEAT_MANY = """
SELECT * FROM jobs.heartbeat_many(job_ids => %(job_ids)b::bigint[], worker => %(worker)s,
                                  lease_versions => %(lease_versions)b::bigint[])
"""
FAIL = """
SELECT * FROM jobs.fail(job_id => %(job_id)s, worker => %(worker)s,
                        lease_version => %(lease_version)s, error => %(error)s,
                        retryable => %(retryable)s)
"""
# The same calls with lease tokens: the claims return jobs.lease_grant (a lease and its
# token) and the writes present the token, so a write is accepted only from whoever was
# handed the lease (docs/sql-api.md, "Lease binding"). The drivers use only these, with
# their arrays given as jobfence.arrays' types, each dumped whole.
# Only a tracing worker asks (jobfence.tracing), once per claimed batch.
TRACE_CONTEXTS = "SELECT job_id, traceparent FROM jobs.trace_contexts(job_ids => %(job_ids)s)"
CLAIM_MANY_WITH_TOKEN = """
SELECT * FROM jobs.claim_many_with_token(job_ids => %(job_ids)b::bigint[], worker => %(worker)s,
                                         queues => %(queues)s::text[])
"""
# A fair claim for a worker fed by Redis: the popped ids of a queue holding keyed jobs are
# claim tokens, as many jobs granted as ids popped, the keys taking turns (claim_next).
CLAIM_NEXT_WITH_TOKEN = """
SELECT * FROM jobs.claim_next_with_token(worker => %(worker)s, queues => %(queues)s::text[],
                                         max_jobs => %(max_jobs)s)
"""
HEARTBEAT_WITH_TOKEN = """
SELECT * FROM jobs.heartbeat(job_id => %(job_id)s, worker => %(worker)s,
                             lease_version => %(lease_version)s, token => %(token)s::uuid)
"""
COMPLETE_WITH_TOKEN = """
SELECT * FROM jobs.complete(job_id => %(job_id)s, worker => %(worker)s,
                            lease_version => %(lease_version)s, result => %(result)s,
                            token => %(token)s::uuid)
"""
# The worker's completions (jobs.complete_many returns one outcome per item, in input order):
# only the outcomes that say more than "accepted, done, nothing woken", each with its item's
# position (from 1). The usual batch then decodes no row at all.
COMPLETE_MANY_WITH_TOKEN_UNUSUAL = """
SELECT o.item, o.job_id, o.accepted, o.status, o.run_after, o.wake
  FROM jobs.complete_many(job_ids => %(job_ids)b::bigint[], worker => %(worker)s,
                          lease_versions => %(lease_versions)b::bigint[],
                          results => %(results)b::jsonb[], tokens => %(tokens)b::uuid[])
       WITH ORDINALITY AS o(job_id, accepted, status, run_after, wake, item)
 WHERE o.accepted IS NOT TRUE OR o.status IS DISTINCT FROM 'done' OR o.wake IS DISTINCT FROM '{}'
"""
FAIL_WITH_TOKEN = """
SELECT * FROM jobs.fail(job_id => %(job_id)s, worker => %(worker)s,
                        lease_version => %(lease_version)s, error => %(error)s,
                        retryable => %(retryable)s, token => %(token)s::uuid)
"""
FAIL_MANY_WITH_TOKEN = """
SELECT * FROM jobs.fail_many(job_ids => %(job_ids)b::bigint[], worker => %(worker)s,
                             lease_versions => %(lease_versions)b::bigint[],
                             errors => %(errors)b::text[], retryable => %(retryable)b::boolean[],
                             tokens => %(tokens)b::uuid[])
"""
# Snoozes ("not now", docs/sql-api.md "snooze") and progress, with lease tokens as above.
SNOOZE_MANY_WITH_TOKEN = """
SELECT * FROM jobs.snooze_many(job_ids => %(job_ids)b::bigint[], worker => %(worker)s,
                               lease_versions => %(lease_versions)b::bigint[],
                               delays => %(delays)b::interval[], tokens => %(tokens)b::uuid[])
"""
PROGRESS_WITH_TOKEN = """
SELECT * FROM jobs.progress(job_id => %(job_id)s, worker => %(worker)s,
                            lease_version => %(lease_version)s, progress => %(progress)s,
                            token => %(token)s::uuid)
"""
HEARTBEAT_MANY_WITH_TOKEN = """
SELECT * FROM jobs.heartbeat_many(job_ids => %(job_ids)b::bigint[], worker => %(worker)s,
                                  lease_versions => %(lease_versions)b::bigint[],
                                  tokens => %(tokens)b::uuid[])
"""

# -- reaper and relay -----------------------------------------------------------------------
REAP = "SELECT * FROM jobs.reap(max_jobs => %(max_jobs)s)"
RECOVER_ENQUEUE_FAILED = "SELECT * FROM jobs.recover_enqueue_failed(max_jobs => %(max_jobs)s)"
STALE_QUEUED = """
SELECT * FROM jobs.stale_queued(queue => %(queue)s, older_than => %(older_than)s,
                                max_jobs => %(max_jobs)s)
"""
LISTEN_SUBMITTED = "LISTEN jobs_submitted"
# How submits reach the relay (notify or table) and, with table, the next stretch of new
# jobs that no running transaction can still add to (docs/design.md §6).
RELAY_SOURCE = "SELECT relay_source FROM jobs.configure_relay()"
POLL_SUBMITTED = "SELECT * FROM jobs.poll_submitted(max_ids => %(max_ids)s)"
# Behind a transaction pooler a pool's statement timeout is set per transaction (db.py); ms
# is an int the driver formats in.
SET_LOCAL_STATEMENT_TIMEOUT = "SET LOCAL statement_timeout = {ms}"
# Where to push woken, replayed or fanned-out jobs: one round trip for any number of ids.
SIGNALS = "SELECT * FROM jobs.signals(job_ids => %(job_ids)b::bigint[])"
# The queues to sweep come from PostgreSQL (declared kinds and queued jobs), never from Redis.
QUEUES = "SELECT queue FROM jobs.queues()"
TYPES = "SELECT * FROM jobs.types()"

# -- operators ------------------------------------------------------------------------------
GET = "SELECT * FROM jobs.get(job_id => %(job_id)s)"
# One round trip for a progress bar over many ids; still nothing but jobs.get.
STATUS_COUNTS = """
SELECT j.status::text AS status, count(*) AS n
  FROM unnest(%(job_ids)b::bigint[]) AS wanted
 CROSS JOIN LATERAL jobs.get(job_id => wanted) AS j
 GROUP BY j.status
"""
# Submission-to-terminal seconds of finished jobs, for the demo's summary.
# Timed as the latency objective times them (jobs.metrics): from when the job was due.
LATENCIES = """
SELECT j.kind, date_part('epoch', j.finished_at - j.due_at) AS seconds
  FROM unnest(%(job_ids)b::bigint[]) AS wanted
 CROSS JOIN LATERAL jobs.get(job_id => wanted) AS j
 WHERE j.finished_at IS NOT NULL
"""
# Long-polling HTTP clients: which of the awaited jobs ended, for all of them in one statement.
TERMINAL_JOBS = """
SELECT j.*
  FROM unnest(%(job_ids)b::bigint[]) AS wanted
 CROSS JOIN LATERAL jobs.get(job_id => wanted) AS j
 WHERE j.status = 'done' OR j.status = 'failed'
"""
EVENTS = "SELECT * FROM jobs.events(job_id => %(job_id)s)"
LIST_JOBS = """
SELECT * FROM jobs.list_jobs(kind => %(kind)s, status => %(status)s::jobs.status,
                             before_id => %(before_id)s, max_jobs => %(max_jobs)s,
                             queue => %(queue)s, ordering_key => %(ordering_key)s)
"""
CHILDREN = "SELECT * FROM jobs.children(job_id => %(job_id)s)"
# The two sides of the job graph, as one row shape (rows.Neighbour).
DEPENDENCIES = """
SELECT depends_on AS job_id, kind, status::text, on_failure, released_at
  FROM jobs.dependencies(job_id => %(job_id)s)
"""
DEPENDENTS = """
SELECT job_id, kind, status::text, on_failure, released_at
  FROM jobs.dependents(job_id => %(job_id)s)
"""
CANCEL = "SELECT * FROM jobs.cancel(job_id => %(job_id)s, reason => %(reason)s)"
REPLAY = "SELECT jobs.replay(job_id => %(job_id)s) AS replayed"
# Bulk re-drive: what it re-queued is what to signal (jobs.signal rows).
REPLAY_MANY = """
SELECT * FROM jobs.replay_many(kind => %(kind)s, error_like => %(error_like)s,
                               failed_since => %(failed_since)s, max_jobs => %(max_jobs)s)
"""

# -- observability (docs/observability.md) -------------------------------------------------
QUEUE_DEPTH = "SELECT * FROM jobs.queue_depth ORDER BY queue, kind"
METRICS = "SELECT * FROM jobs.metrics(since => %(since)s)"
AUDIT = "SELECT * FROM jobs.audit(reaper_interval => %(reaper_interval)s, examples => %(examples)s)"
COMPACT_METRICS = "SELECT jobs.compact_metrics(max_rows => %(max_rows)s) AS folded"
PRUNE = "SELECT jobs.prune(older_than => %(older_than)s, max_jobs => %(max_jobs)s::integer) AS pruned"
DEAD_LETTERS = "SELECT * FROM jobs.dead_letters(job_ids => %(job_ids)b::bigint[])"
LISTEN_DEAD_LETTERED = "LISTEN jobs_dead_lettered"
CLAIM_PAGES = "SELECT * FROM jobs.claim_pages(max_pages => %(max_pages)s, hold => %(hold)s)"
SETTLE_PAGES = """
SELECT jobs.settle_pages(page_ids => %(page_ids)s::bigint[], errors => %(errors)s::text[],
                         retry_base => %(retry_base)s, retry_max => %(retry_max)s) AS delivered"""
PAGES = "SELECT * FROM jobs.pages(undelivered_only => %(undelivered_only)s, max_pages => %(max_pages)s)"
PAGE_BACKLOG = "SELECT * FROM jobs.page_backlog()"
REPEAT_DIFFERENCES = "SELECT * FROM jobs.repeat_differences(specs => %(specs)s)"

# define_type's defaults belong to the SQL: only the options a task names are passed, so an
# omitted one takes the server default instead of a copy of it kept here.
DEFINE_TYPE_OPTIONS = (
    "queue", "lease_timeout", "timeout", "max_retries", "backoff_base", "backoff_max",
    "max_payload_bytes", "slo_latency", "slo_target", "slo_success", "max_backlog",
    "run_time_budget", "max_failure_rate", "priority", "max_running", "rate_limit", "rate_period",
    "on_dead", "max_running_per_key",
)


NUMERIC_OPTIONS = ("slo_target", "slo_success", "max_failure_rate")


def define_type(options) -> _sql.Composed:
    """``SELECT * FROM jobs.define_type(kind => %(kind)s, <option> => %(<option>)s, ...)``."""
    unknown = set(options) - set(DEFINE_TYPE_OPTIONS)
    if unknown:
        raise ValueError(f"unknown define_type option(s): {', '.join(sorted(unknown))}")
    args = [_sql.SQL("kind => %(kind)s")]
    for name in DEFINE_TYPE_OPTIONS:
        if name in options:
            # Python floats travel as double precision; these parameters are numeric.
            cast = _sql.SQL("::numeric" if name in NUMERIC_OPTIONS else "")
            args.append(_sql.SQL("{} => {}{}").format(_sql.Identifier(name), _sql.Placeholder(name), cast))
    return _sql.SQL("SELECT * FROM jobs.define_type({})").format(_sql.SQL(", ").join(args))

# -- web dashboard (docs/ui.md) ----------------------------------------------------------------
# A page's reads in one snapshot (the first statement of its transaction), as `stats` reads.
READ_ONLY_SNAPSHOT = "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY"
# Per-minute counts for the dashboard's charts, still nothing but jobs.metrics: window k starts
# k whole minutes ago (k = 0: the current minute), all read at one now(), so the counts of
# minute k are window k less window k - 1.
METRIC_WINDOWS = """
SELECT w.k, m.kind, m.window_start, m.submitted, m.succeeded, m.failed, m.reaped, m.dead_lettered
  FROM generate_series(0, %(minutes)s::integer) AS w(k)
 CROSS JOIN LATERAL jobs.metrics(since => CASE WHEN w.k = 0 THEN interval '1 microsecond'
                                               ELSE make_interval(mins => w.k) END) AS m
 ORDER BY w.k, m.kind
"""

# -- periodic jobs (docs/sql-api.md, "schedule") --------------------------------------------
# created: as SUBMIT_CREATED, a row this statement inserted carries its transaction's now().
SCHEDULE = """
SELECT *, created_at = now() AS created
  FROM jobs.schedule(name => %(name)s, cron => %(cron)s, kind => %(kind)s,
                     payload => %(payload)s, timezone => %(timezone)s, missed => %(missed)s,
                     enabled => %(enabled)s)
"""
UNSCHEDULE = "SELECT jobs.unschedule(name => %(name)s) AS removed"
SCHEDULES = "SELECT * FROM jobs.schedules()"
# The ticker reads the database's clock with the schedules: ticks fall due by its now(), the
# instant jobs.enqueue_tick checks them against, so reapers whose own clocks differ agree.
DUE_SCHEDULES = "SELECT s.*, now() AS database_now FROM jobs.schedules() AS s WHERE s.enabled"
ENQUEUE_TICK = """
SELECT * FROM jobs.enqueue_tick(name => %(name)s, tick => %(tick)s, next_tick => %(next_tick)s)
"""
SKIP_TICKS = """
SELECT * FROM jobs.skip_ticks(name => %(name)s, through => %(through)s, next_tick => %(next_tick)s)
"""

# -- priorities, paused queues, global limits (docs/sql-api.md) ------------------------------
PAUSE = "SELECT jobs.pause(queue => %(queue)s) AS changed"
RESUME = "SELECT jobs.resume(queue => %(queue)s) AS changed"
PAUSED_QUEUES = "SELECT * FROM jobs.paused_queues()"
KEYED_QUEUES = "SELECT queue FROM jobs.keyed_queues(queues => %(queues)s::text[])"
# After a claim that granted fewer ids than were popped: which of the others a kind's limit
# held back, and when to push them again.
HELD_BACK = "SELECT * FROM jobs.held_back(job_ids => %(job_ids)b::bigint[])"
# Every process that touches Redis, once: the prefix of this deployment's keys.
REDIS_NAMESPACE = "SELECT jobs.redis_namespace() AS namespace"
# After a partial grant, in one round trip: what a kind's limit held back (to push again) and
# why the others were not granted (to count, and to warn about ids of another deployment or
# queue).
MISSED = """
SELECT h.job_id, h.queue, h.run_after, h.priority, NULL::text AS cause
  FROM jobs.held_back(job_ids => %(job_ids)b::bigint[]) AS h
UNION ALL
SELECT u.job_id, NULL, NULL, NULL, u.cause
  FROM jobs.unclaimed(job_ids => %(job_ids)b::bigint[], queues => %(queues)s::text[]) AS u
"""

# -- history partitions (docs/sql-api.md "create_event_partitions", "drop_event_partitions") -
CREATE_EVENT_PARTITIONS = "SELECT jobs.create_event_partitions(ahead => %(ahead)s) AS created"
DROP_EVENT_PARTITIONS = "SELECT jobs.drop_event_partitions(older_than => %(older_than)s) AS dropped"
