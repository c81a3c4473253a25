"""The app the chaos workers serve (``jobfence_chaos.workload:app``) and the tables its
handlers write in the run's database.

Kinds: ``chaos_quick``; ``chaos_slow`` (runs past its first heartbeat); ``chaos_flaky``
(raises with probability p, retried); ``chaos_effect`` (transactional: one row in
``chaos.effect`` in the transaction of ``jobs.complete``); ``chaos_child`` and
``chaos_fanin`` (the coordinator of a fan-out, which records its run); ``chaos_ordered``
(records, in its own transaction, the moment it started, so start order per ordering key can
be checked). Timings come from the environment (read at import) so the runner scales the
leases down for every process alike.
"""

from __future__ import annotations

import os
import random
import time

import psycopg

from jobfence.app import App

LEASE_ENV = "JOBFENCE_CHAOS_LEASE_TIMEOUT"
RETRIES_ENV = "JOBFENCE_CHAOS_MAX_RETRIES"

# ctx.tx is inside the completing transaction, so a fenced (stale) attempt's rows roll back
# with its refused jobs.complete: a row here is an accepted effect, never an attempt.
TABLES = """
CREATE SCHEMA IF NOT EXISTS chaos;
CREATE TABLE IF NOT EXISTS chaos.effect (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id bigint NOT NULL,
    lease_version bigint NOT NULL,
    worker text NOT NULL,
    written_at timestamptz NOT NULL DEFAULT clock_timestamp());
CREATE INDEX IF NOT EXISTS effect_job_idx ON chaos.effect (job_id);
CREATE SEQUENCE IF NOT EXISTS chaos.start_seq;
CREATE TABLE IF NOT EXISTS chaos.ordered_run (
    job_id bigint NOT NULL,
    ordering_key text NOT NULL,
    lease_version bigint NOT NULL,
    seq bigint NOT NULL,
    started_at timestamptz NOT NULL);
CREATE TABLE IF NOT EXISTS chaos.fan_in (
    job_id bigint NOT NULL,
    lease_version bigint NOT NULL,
    ran_at timestamptz NOT NULL DEFAULT clock_timestamp());
"""


def create_tables(conn: psycopg.Connection) -> None:
    try:
        conn.execute(TABLES)
    except (psycopg.errors.UniqueViolation, psycopg.errors.DuplicateTable,
            psycopg.errors.DuplicateObject):
        pass  # another worker created them at the same moment


def _options() -> dict:
    return {"lease_timeout": float(os.environ.get(LEASE_ENV, "1.5")),
            "max_retries": int(os.environ.get(RETRIES_ENV, "8")),
            # Short backoff: a flaky job's retries should not dominate the run's tail.
            "backoff_base": 0.1, "backoff_max": 0.5, "timeout": 30.0}


app = App("jobfence-chaos", queue="chaos")
_OPTIONS = _options()
app.on_start(create_tables)


def _seconds(payload) -> float:
    return float((payload or {}).get("seconds", 0))


@app.task("chaos_quick", **_OPTIONS)
def quick(job_id, payload, ctx):
    return {"ok": True}


@app.task("chaos_slow", **_OPTIONS)
def slow(job_id, payload, ctx):
    # Plain sleep, deaf to ctx: a stalled or fenced worker finishes it and must then be
    # refused at jobs.complete rather than stopped early.
    time.sleep(_seconds(payload))
    return {"slept": _seconds(payload)}


@app.task("chaos_flaky", **_OPTIONS)
def flaky(job_id, payload, ctx):
    if random.random() < float((payload or {}).get("p", 0.3)):
        raise RuntimeError(f"chaos_flaky: planned failure on attempt {ctx.attempt}")
    return {"attempt": ctx.attempt}


@app.task("chaos_effect", transactional=True, **_OPTIONS)
def effect(job_id, payload, ctx):
    time.sleep(_seconds(payload))
    ctx.tx.execute("INSERT INTO chaos.effect (job_id, lease_version, worker) VALUES (%s, %s, %s)",
                   (job_id, ctx.lease.lease_version, ctx.worker))
    return {"written": True}


@app.task("chaos_child", **_OPTIONS)
def child(job_id, payload, ctx):
    time.sleep(_seconds(payload))
    return {"child": True}


@app.task("chaos_fanin", transactional=True, **_OPTIONS)
def fan_in(job_id, payload, ctx):
    ctx.tx.execute("INSERT INTO chaos.fan_in (job_id, lease_version) VALUES (%s, %s)",
                   (job_id, ctx.lease.lease_version))
    return {"coordinated": True}


@app.task("chaos_ordered", transactional=True, **_OPTIONS)
def ordered(job_id, payload, ctx):
    # The lease does not carry the ordering key, so the producer repeats it in the payload.
    # The sequence number is drawn when the handler starts (nextval is not transactional),
    # the row commits only with an accepted completion: per key, accepted runs by start.
    ctx.tx.execute("INSERT INTO chaos.ordered_run (job_id, ordering_key, lease_version, seq, "
                   "started_at) VALUES (%s, %s, %s, nextval('chaos.start_seq'), clock_timestamp())",
                   (job_id, payload["key"], ctx.lease.lease_version))
    time.sleep(_seconds(payload))
    return {"ordered": True}
