"""The example app (``jobfence.examples:app``) used by the README demo, the tests and the
benchmarks.

Kinds: ``noop``; ``sleep`` (payload ``{"seconds": s}``, honours cancellation); ``flaky``
(payload ``{"p": 0.3}`` fails with probability p, or ``{"fail_times": n}`` fails its first
n attempts); ``crash`` (kills its own process, payload ``{"p": 1.0}``); ``transfer``, a
transactional kind writing one row to ``public.jobfence_example_effect`` in the transaction
that completes the job, so a stale worker's row rolls back with its rejected completion.

The type options can be shortened for tests through the environment (read at import):
JOBFENCE_EXAMPLE_LEASE_TIMEOUT, _TIMEOUT, _MAX_RETRIES, _BACKOFF_BASE, _BACKOFF_MAX (seconds
or counts) and JOBFENCE_EXAMPLE_QUEUE.
"""

from __future__ import annotations

import os
import random
import signal
import time

import psycopg

from .app import App
from .errors import NonRetryable

EFFECT_TABLE = "public.jobfence_example_effect"
CREATE_EFFECT_TABLE = f"""
CREATE TABLE IF NOT EXISTS {EFFECT_TABLE} (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id bigint NOT NULL,
    lease_version bigint NOT NULL,
    worker text NOT NULL,
    amount numeric,
    written_at timestamptz NOT NULL DEFAULT clock_timestamp()
)
"""


def _env_options() -> dict:
    options: dict = {}
    for name, cast in (("lease_timeout", float), ("timeout", float), ("max_retries", int),
                       ("backoff_base", float), ("backoff_max", float)):
        raw = os.environ.get(f"JOBFENCE_EXAMPLE_{name.upper()}")
        if raw:
            options[name] = cast(raw)
    return options


app = App("jobfence-examples", queue=os.environ.get("JOBFENCE_EXAMPLE_QUEUE", "default"))
_OPTIONS = _env_options()


@app.on_start
def create_effect_table(conn):
    try:
        conn.execute(CREATE_EFFECT_TABLE)
    except (psycopg.errors.UniqueViolation, psycopg.errors.DuplicateTable):
        pass  # another worker created it at the same moment


@app.task("noop", **_OPTIONS)
def noop(job_id, payload, ctx):
    return {"ok": True}


@app.task("sleep", **_OPTIONS)
def sleep(job_id, payload, ctx):
    seconds = float((payload or {}).get("seconds", 1))
    ctx.sleep(seconds)  # wakes at once on cancel, timeout or lost lease
    return {"slept": seconds}


@app.task("flaky", **_OPTIONS)
def flaky(job_id, payload, ctx):
    payload = payload or {}
    if "fail_times" in payload:
        if ctx.attempt <= int(payload["fail_times"]):
            raise RuntimeError(f"flaky: planned failure on attempt {ctx.attempt}")
    elif random.random() < float(payload.get("p", 0.5)):
        if payload.get("permanent"):
            raise NonRetryable("flaky: permanent failure")
        raise RuntimeError(f"flaky: random failure on attempt {ctx.attempt}")
    return {"attempt": ctx.attempt}


@app.task("crash", **_OPTIONS)
def crash(job_id, payload, ctx):
    payload = payload or {}
    # {"attempts": n} crashes its first n attempts only; {"p": x} crashes at random.
    doomed = (ctx.attempt <= int(payload["attempts"])) if "attempts" in payload \
        else random.random() < float(payload.get("p", 1.0))
    if doomed:
        ctx.log.warning("crash: killing my own process")
        os.kill(os.getpid(), signal.SIGKILL)
    return {"survived": True}


@app.task("transfer", transactional=True, **_OPTIONS)
def transfer(job_id, payload, ctx):
    payload = payload or {}
    # The "work" comes first and is not interruptible on purpose: a paused worker resumes
    # here, writes its row and then loses at jobs.complete, which rolls the row back.
    time.sleep(float(payload.get("seconds", 0)))
    ctx.tx.execute(
        f"INSERT INTO {EFFECT_TABLE} (job_id, lease_version, worker, amount) "
        "VALUES (%s, %s, %s, %s)",
        (job_id, ctx.lease.lease_version, ctx.worker, payload.get("amount")))
    return {"written": True, "lease_version": ctx.lease.lease_version}
