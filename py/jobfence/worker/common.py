"""What the worker's rooms share: the per-job record, backoff, result checks, log helpers."""

from __future__ import annotations

import json
import logging
import os
import socket
import time
from typing import Any, Protocol

from psycopg.types.json import Jsonb

from .. import log as jlog
from ..app import Context, Task
from ..rows import Lease

logger = logging.getLogger("jobfence.worker")

# How long an outcome (complete/fail) is retried while PostgreSQL is unreachable. Past it the
# lease has long expired: the reaper requeues the job, so giving up loses nothing.
OUTCOME_RETRY_SECONDS = 60.0

# Job.state: where the handler is. Written only by the executor that owns the job.
WAITING, RUNNING, RETURNED = 0, 1, 2


def default_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


class Job:
    """One held lease, from claim to its reported outcome.

    ``take()`` is the single right to report the job: the handler's return, a timeout, a lost
    lease and a shutdown hand-back race for it, and exactly one wins. It is a pop from a
    one-element list, atomic under the GIL, so the hot path takes no lock for it.
    """

    __slots__ = ("lease", "job_id", "lease_version", "task", "ctx", "state", "finished",
                 "deadline", "beat_every", "next_beat", "started", "_token", "hung", "span")

    def __init__(self, lease: Lease, task: Task | None, ctx: Context, clock: LeaseClock):
        self.lease = lease
        self.job_id = lease.job_id
        self.lease_version = lease.lease_version
        self.task = task
        self.ctx = ctx
        self.state = WAITING
        self.finished = False  # set by whoever removes the job from the held set
        self.hung = False
        # Deadlines follow the lease this job was granted, never the kind's current
        # definition: a changed definition applies to new claims only.
        self.deadline, self.beat_every = clock.of(lease)
        self.next_beat = clock.now + self.beat_every
        self.started = 0.0
        self._token = [True]
        # The attempt's span when the worker traces (jobfence.tracing), else None.
        self.span = None

    def take(self) -> bool:
        try:
            self._token.pop()
            return True
        except IndexError:
            return False

    @property
    def taken(self) -> bool:
        return not self._token

    def fields(self, worker: str) -> dict:
        return {"job_id": self.job_id, "lease_version": self.lease_version, "worker": worker,
                "kind": self.lease.kind}


class LeaseClock:
    """A claimed batch's lease instants on this process's monotonic clock, read once per
    batch. The leases of one claim usually name the same two instants (one transaction's
    now(), one kind's timeouts), and comparing two aware datetimes costs far less than
    converting one: a conversion is reused while the instants repeat."""

    __slots__ = ("now", "wall", "_expires_at", "_timeout_at", "_found")

    def __init__(self) -> None:
        self.now, self.wall = time.monotonic(), time.time()
        self._expires_at = self._timeout_at = None
        self._found = (0.0, 0.0)

    def of(self, lease: Lease) -> tuple[float, float]:
        """(the monotonic time the lease's execution timeout falls due, how often to beat:
        a third of the lease's time left, at least every 0.1 s)."""
        if lease.lease_expires_at != self._expires_at or lease.timeout_at != self._timeout_at:
            self._expires_at, self._timeout_at = lease.lease_expires_at, lease.timeout_at
            remaining = lease.lease_expires_at.timestamp() - self.wall
            self._found = (self.now + (lease.timeout_at.timestamp() - self.wall),
                           max(0.1, remaining / 3))
        return self._found


# One encoder for every result: json.dumps with a non-default option builds a new encoder
# on each call, which cost more than encoding a small result.
_STRICT_JSON = json.JSONEncoder(allow_nan=False)
# JSONEncoder.encode still builds its C encoder on every call (0.9 of a no-op result's
# 1.4 us): this one is built once, with _STRICT_JSON's options. It keeps no circular-
# reference markers, which a shared encoder could not keep safely for handler threads
# encoding at once: a result that contains itself ends in RecursionError instead of
# ValueError, a problem all the same (docs/performance.md, "What the worker decodes and
# encodes per job").
_strict_chunks = (json.encoder.c_make_encoder(None, _STRICT_JSON.default, json.encoder.encode_basestring_ascii,
                                              None, ": ", ", ", False, False, False)
                  if json.encoder.c_make_encoder is not None else None)


def _strict_text(result: Any) -> str:
    if _strict_chunks is None:  # an interpreter without the C accelerator
        return _STRICT_JSON.encode(result)
    return "".join(_strict_chunks(result, 0))


def encode_result(result: Any) -> tuple[str | None, Jsonb | None]:
    """``(problem, None)`` when PostgreSQL would reject ``result`` as jsonb, else ``(None,
    sendable)``: the result as the jsonb parameter of its completion, encoded here once (the
    check's own dump is what is sent), or None for a None result (SQL NULL). Cheap enough for
    every job: one strict dump, plus a walk only in the rare case a NUL may be present."""
    if result is None:
        return None, None
    try:
        text = _strict_text(result)
    except (TypeError, ValueError, RecursionError) as exc:
        return f"result is not JSON: {type(exc).__name__}: {exc}", None
    # json.dumps writes NUL as the escape \u0000, which jsonb refuses. The escape text itself
    # ("\\u0000" in a string) also matches here, so confirm with a walk before refusing.
    if "\\u0000" in text and _has_nul(result):
        return "result holds a NUL character (\\x00), which jsonb cannot store", None
    return None, Jsonb(text, dumps=_as_is)


def _as_is(text: str) -> str:
    return text


def _has_nul(value: Any) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_has_nul(k) or _has_nul(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return any(_has_nul(v) for v in value)
    return False


def sqlstate(exc: BaseException) -> str | None:
    return getattr(exc, "sqlstate", None)


def describe(exc: BaseException) -> str:
    diag = getattr(exc, "diag", None)
    text = (getattr(diag, "message_primary", None) if diag else None) or str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}".rstrip(": ")


def event(level: int, name: str, msg: str, **fields: Any) -> None:
    jlog.event(logger, level, name, msg, **fields)


class Host(Protocol):
    """What the rooms may ask of the worker that holds them (``core.Worker``): its name and
    connections, its other rooms, and the job table. The rooms name this rather than the
    Worker class, so the worker depends on its rooms and never the other way round."""

    name: str
    queues: list[str]
    db: Any
    transport: Any
    claimer: Any
    reporter: Any
    held: dict[int, "Job"]
    tracer: Any

    def forget(self, job: "Job") -> None: ...

    def timed_out(self, job: "Job") -> None: ...


    def out_of_time(self) -> bool: ...

    def log_stats(self) -> None: ...
