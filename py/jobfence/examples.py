"""The example app (``jobfence.examples:app``) used by the README demo, the tests and the
benchmarks.

Kinds: ``noop``; ``sleep`` (payload ``{"seconds": s}``, honours cancellation); ``flaky``
(payload ``{"p": 0.3}`` fails with probability p, or ``{"fail_times": n}`` fails its first
n attempts); ``crash`` (kills its own process, payload ``{"p": 1.0}``); ``transfer``, a
transactional kind writing one row to ``public.jobfence_example_effect`` in the transaction
that completes the job, so a stale worker's row rolls back with its rejected completion.

Async kinds (run many at a time on the worker's event loop): ``anoop`` and ``asleep``
(payload ``{"seconds": s}``). Misbehaving handlers, for the failure tests: ``hang`` (payload
``{"seconds": s}``: sleeps ignoring ``ctx``, holding its thread past the timeout),
``hang_process`` (the same in a child process, ``executor="process"``: killed at the
timeout; ``{"seconds": 0}`` returns at once), ``poison`` (returns a result jsonb cannot
hold: payload ``{"mode": "nan" | "nul" | "surrogate"}``) and ``raise_base`` (raises
``SystemExit``, ``KeyboardInterrupt`` or a bare ``BaseException``: payload ``{"exc": name}``).
``not_before`` (payload ``{"at": epoch}``) snoozes (``raise Snooze``) until that time;
``steps`` (payload ``{"steps": n, "seconds": s}``) reports ``ctx.progress`` after each step;
``steps_process`` does the same in a child process (``executor="process"``).

The type options can be shortened for tests through the environment (read at import):
JOBFENCE_EXAMPLE_LEASE_TIMEOUT, _TIMEOUT, _MAX_RETRIES, _BACKOFF_BASE, _BACKOFF_MAX (seconds
or counts) and JOBFENCE_EXAMPLE_QUEUE.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import time

from .app import App
from .errors import NonRetryable, Snooze

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


# The transfer kind writes its effect in the job's transaction: a table of the app's own,
# created by a worker that may (a superuser on a laptop) or by the DBA from
# `jobfence grants --app jobfence.examples:app` (scripts/run does that).
app.table(EFFECT_TABLE, CREATE_EFFECT_TABLE, privileges="SELECT, INSERT")


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


@app.task("anoop", **_OPTIONS)
async def anoop(job_id, payload, ctx):
    return {"ok": True}


@app.task("asleep", **_OPTIONS)
async def asleep(job_id, payload, ctx):
    seconds = float((payload or {}).get("seconds", 1))
    await asyncio.sleep(seconds)  # a cancel, timeout or lost lease cancels this task
    # How many handlers share this event loop right now (the tests read it).
    return {"slept": seconds, "peers": len(asyncio.all_tasks())}


@app.task("hang", **_OPTIONS)
def hang(job_id, payload, ctx):
    seconds = float((payload or {}).get("seconds", 60))
    time.sleep(seconds)  # deliberately deaf to ctx: the thread outlives the timeout
    return {"slept": seconds}


@app.task("hang_process", executor="process", **_OPTIONS)
def hang_process(job_id, payload, ctx):
    seconds = float((payload or {}).get("seconds", 60))
    time.sleep(seconds)  # deaf to ctx too, but its process is killed at the timeout
    return {"slept": seconds, "pid": os.getpid()}


_POISON = {"nan": float("nan"), "nul": "a\x00b", "surrogate": "\ud800"}


@app.task("poison", **_OPTIONS)
def poison(job_id, payload, ctx):
    return {"value": _POISON[(payload or {}).get("mode", "nan")]}


_BASE = {"SystemExit": SystemExit, "KeyboardInterrupt": KeyboardInterrupt,
         "BaseException": BaseException}


@app.task("raise_base", **_OPTIONS)
def raise_base(job_id, payload, ctx):
    raise _BASE[(payload or {}).get("exc", "SystemExit")]("raised by the raise_base example")


@app.task("not_before", **_OPTIONS)
def not_before(job_id, payload, ctx):
    """Snoozes until the epoch second ``payload["at"]``, then returns how often it woke."""
    wait = float((payload or {}).get("at", 0)) - time.time()
    if wait > 0:
        raise Snooze(wait)
    return {"ran_at": time.time()}


@app.task("steps", **_OPTIONS)
def steps(job_id, payload, ctx):
    """Reports ``ctx.progress`` after each of ``payload["steps"]`` steps of ``payload["seconds"]``."""
    total = int((payload or {}).get("steps", 3))
    for done in range(1, total + 1):
        ctx.sleep(float((payload or {}).get("seconds", 0.05)))
        ctx.progress({"done": done, "of": total})
    return {"steps": total}


@app.task("steps_process", executor="process", **_OPTIONS)
def steps_process(job_id, payload, ctx):
    """``steps`` in a child process: its reports travel through the worker."""
    return {**steps(job_id, payload, ctx), "pid": os.getpid()}


@app.task("refund", **_OPTIONS)
def refund(job_id, payload, ctx):
    """The compensation of ``charge``: what a dead charge already did outside the database
    (here nothing, but a card payment cannot roll back) is undone by another job."""
    dead = (payload or {}).get("dead_job") or {}
    return {"refunded": dead.get("id"), "cents": (dead.get("payload") or {}).get("cents")}


@app.task("charge", on_dead="refund", **_OPTIONS)
def charge(job_id, payload, ctx):
    """Fails for good when ``payload["declined"]``: its dead letter submits a ``refund``."""
    if (payload or {}).get("declined"):
        raise NonRetryable("charge: card declined")
    return {"charged": (payload or {}).get("cents")}
