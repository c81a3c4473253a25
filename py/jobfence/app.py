"""Task registry: ``App`` declares kinds (``jobs.define_type``) and maps them to handlers."""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Callable

import psycopg

from .errors import Cancelled
from .rows import Lease

log = logging.getLogger("jobfence.app")

Handler = Callable[[int, Any, "Context"], Any]


@dataclass
class Task:
    kind: str
    handler: Handler
    queue: str
    options: dict = field(default_factory=dict)
    transactional: bool = False


class App:
    """A set of task kinds and their handlers.

    >>> app = App()
    >>> @app.task("send_invoice", timeout=30, max_retries=3, queue="default")
    ... def send_invoice(job_id, payload, ctx):
    ...     return {"sent": payload["invoice_id"]}
    """

    def __init__(self, name: str = "jobfence", *, queue: str = "default"):
        self.name = name
        self.default_queue = queue
        self.tasks: dict[str, Task] = {}
        self.start_hooks: list[Callable[[psycopg.Connection], None]] = []

    def on_start(self, hook: Callable[[psycopg.Connection], None]):
        """Register ``hook(conn)``, run by each worker after declaring the kinds (e.g. to
        create the tables the handlers write). It must be idempotent."""
        self.start_hooks.append(hook)
        return hook

    def task(self, kind: str, *, queue: str | None = None,
             timeout: float | timedelta | None = None, max_retries: int | None = None,
             lease_timeout: float | timedelta | None = None,
             backoff_base: float | timedelta | None = None,
             backoff_max: float | timedelta | None = None,
             max_payload_bytes: int | None = None,
             slo_latency: float | timedelta | None = None, slo_target: float | None = None,
             transactional: bool = False) -> Callable[[Handler], Handler]:
        """Declare a kind and register its handler ``handler(job_id, payload, ctx)``.

        Options left out take the SQL defaults of ``jobs.define_type`` (lease 15 s, timeout
        30 s, 3 retries, ...). ``transactional=True`` gives the handler ``ctx.tx``, a
        connection inside the transaction in which the worker then calls ``jobs.complete``:
        a rejected completion (JB001) rolls the handler's writes back with it.
        """
        options = {k: v for k, v in dict(
            timeout=timeout, max_retries=max_retries, lease_timeout=lease_timeout,
            backoff_base=backoff_base, backoff_max=backoff_max,
            max_payload_bytes=max_payload_bytes, slo_latency=slo_latency,
            slo_target=slo_target).items() if v is not None}
        options["queue"] = queue or self.default_queue

        def register(handler: Handler) -> Handler:
            if kind in self.tasks:
                raise ValueError(f"kind {kind!r} is already registered")
            self.tasks[kind] = Task(kind, handler, options["queue"], options, transactional)
            return handler

        return register

    @property
    def queues(self) -> list[str]:
        return sorted({t.queue for t in self.tasks.values()})

    def declare(self, db) -> dict[str, dict]:
        """``jobs.define_type`` for every kind; returns the stored definitions by kind.

        Without the right to declare (role jobs_worker only) the kinds must already exist;
        that is logged, not fatal, because an administrator may have declared them."""
        declared: dict[str, dict] = {}
        for task in self.tasks.values():
            try:
                declared[task.kind] = db.define_type(task.kind, **task.options)
            except psycopg.errors.InsufficientPrivilege:
                log.warning("not allowed to declare kind %s; assuming an administrator did",
                            task.kind, extra={"event": "declare_skipped",
                                              "fields": {"kind": task.kind}})
        for hook in self.start_hooks:
            with db.connection() as conn:
                hook(conn)
        return declared


class Context:
    """What a handler gets besides its job id and payload."""

    def __init__(self, lease: Lease, worker: str, logger: logging.LoggerAdapter,
                 tx_factory: Callable[[], psycopg.Connection] | None = None):
        self.lease = lease
        self.job_id = lease.job_id
        self.kind = lease.kind
        self.queue = lease.queue
        self.attempt = lease.attempt
        self.worker = worker
        self.log = logger
        self._cancelled = threading.Event()
        self.cancel_reason: str | None = None
        self._tx_factory = tx_factory
        self._tx: psycopg.Connection | None = None

    # -- cancellation ---------------------------------------------------------------------
    def cancelled(self) -> bool:
        """True once the job should stop: operator cancel, timeout, lost lease or the
        worker's shutdown grace ran out. Check it at safe points."""
        return self._cancelled.is_set()

    def raise_if_cancelled(self) -> None:
        if self._cancelled.is_set():
            raise Cancelled(self.cancel_reason or "cancelled")

    def sleep(self, seconds: float) -> None:
        """Sleep that wakes up at once on cancellation (then raises ``Cancelled``)."""
        if self._cancelled.wait(max(0.0, seconds)):
            raise Cancelled(self.cancel_reason or "cancelled")

    def _cancel(self, reason: str) -> None:
        if not self._cancelled.is_set():
            self.cancel_reason = reason
            self._cancelled.set()

    # -- transactional kinds --------------------------------------------------------------
    @property
    def tx(self) -> psycopg.Connection:
        """A connection in an open transaction, committed together with ``jobs.complete``.
        Opened on first use, so the transaction spans only the handler's writes."""
        if self._tx_factory is None:
            raise RuntimeError(f"kind {self.kind!r} is not transactional: declare it with "
                               "@app.task(..., transactional=True) to get ctx.tx")
        if self._tx is None:
            self._tx = self._tx_factory()
        return self._tx


def load_app(ref: str) -> App:
    """``package.module:attr`` -> the App object."""
    import importlib

    module_name, _, attr = ref.partition(":")
    if not module_name or not attr:
        raise ValueError(f"--app must look like MODULE:ATTR, got {ref!r}")
    obj = importlib.import_module(module_name)
    for part in attr.split("."):
        obj = getattr(obj, part)
    if not isinstance(obj, App):
        raise TypeError(f"{ref} is a {type(obj).__name__}, not a jobfence.App")
    return obj


def monotonic_deadline(wall_at) -> float:
    """Turn a server timestamp into a local monotonic deadline."""
    return time.monotonic() + (wall_at.timestamp() - time.time())
