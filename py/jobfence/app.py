"""Task registry: ``App`` declares kinds (``jobs.define_type``) and maps them to handlers."""

from __future__ import annotations

import functools
import inspect
import logging
import sys
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
    # "thread" (sync handlers), "async" (``async def`` handlers, on the worker's event loop)
    # or "process" (a child process the worker kills at the job's timeout).
    executor: str = "thread"


EXECUTORS = ("thread", "async", "process")


@dataclass
class Periodic:
    """A schedule the app declares (``@app.periodic``), upserted with ``jobs.schedule``."""

    name: str
    cron: str
    kind: str
    payload: dict = field(default_factory=dict)
    timezone: str = "UTC"
    missed: str = "once"


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
        self.periodics: dict[str, Periodic] = {}
        self.tables: dict[str, Any] = {}  # name -> app_setup.Table
        self.ref: str | None = None  # how it was named (--app MODULE:APP), for messages
        # Where handler.defer() submits (App.bind); None until bound.
        self.client: Any = None
        self.async_client: Any = None

    def bind(self, client: Any = None, async_client: Any = None) -> "App":
        """The ``Client`` (and ``AsyncClient``) that ``handler.defer(...)`` and
        ``handler.defer_async(...)`` submit through; returns the app."""
        self.client, self.async_client = client, async_client
        return self

    def _defer(self, kind: str, payload: Any = None, *, client: Any = None, **options: Any) -> int:
        client = client or self.client
        if client is None:
            raise RuntimeError(f"{kind}.defer: no Client bound: call app.bind(Client(...)) "
                               "first, or pass client=")
        return client.submit(kind, payload, **options)

    async def _defer_async(self, kind: str, payload: Any = None, *, client: Any = None,
                           **options: Any) -> int:
        client = client or self.async_client
        if client is None:
            raise RuntimeError(f"{kind}.defer_async: no AsyncClient bound: call "
                               "app.bind(async_client=AsyncClient(...)) first, or pass client=")
        return await client.submit(kind, payload, **options)

    def table(self, name: str, ddl: str, *, privileges: str | tuple = ("SELECT", "INSERT")):
        """Declare a table the handlers write (schema-qualified ``name``, an idempotent
        ``CREATE TABLE IF NOT EXISTS`` and what the handlers do to it). Workers create it
        when their login may, else check it exists and is theirs to write;
        ``jobfence grants --app`` prints the SQL a DBA runs (docs/python.md)."""
        from .app_setup import table

        found = self.tables[name] = table(name, ddl, privileges)
        return found

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
             slo_success: float | None = None, max_backlog: int | None = None,
             run_time_budget: float | timedelta | None = None,
             max_failure_rate: float | None = None,
             priority: int | None = None, max_running: int | None = None,
             rate_limit: int | None = None, rate_period: float | timedelta | None = None,
             on_dead: str | None = None, max_running_per_key: int | None = None,
             transactional: bool = False,
             executor: str | None = None) -> Callable[[Handler], Handler]:
        """Declare a kind and register its handler ``handler(job_id, payload, ctx)``.

        Options left out take the SQL defaults of ``jobs.define_type`` (lease 15 s, timeout
        30 s, 3 retries, ...). ``transactional=True`` gives the handler ``ctx.tx``, a
        connection inside the transaction in which the worker then calls ``jobs.complete``:
        a rejected completion (JB001) rolls the handler's writes back with it.

        ``priority`` (0, the default, runs first; up to 9) is the kind's default, which a
        submit may override. ``max_running`` bounds the kind's running jobs across every
        worker, and ``rate_limit`` per ``rate_period`` (seconds) its claims;
        ``max_running_per_key`` bounds its running jobs of each ``concurrency_key`` (a
        tenant, a customer) given at submit. Left out, the kind is unlimited.

        ``on_dead`` names a compensating kind: when a job of this kind dead-letters, a job of
        that kind is submitted in the same transaction, its payload ``{"dead_job": {"id",
        "kind", "queue", "error", "reason", "retry_count", "payload"}}``, once per job even
        across replays (docs/python.md, "Compensating what cannot roll back").

        ``executor`` says where the handler runs: ``"thread"`` (default for plain functions),
        ``"async"`` (default for ``async def``: many in flight on the worker's event loop) or
        ``"process"`` (a child process, killed at the job's timeout, cancel request or lost
        lease: for handlers that must be stopped even when they ignore ``ctx``). A process
        handler must be a module-level function importable by name.
        """
        if executor is not None and executor not in EXECUTORS:
            raise ValueError(f"executor must be one of {', '.join(EXECUTORS)}, got {executor!r}")
        options = {k: v for k, v in dict(
            timeout=timeout, max_retries=max_retries, lease_timeout=lease_timeout,
            backoff_base=backoff_base, backoff_max=backoff_max,
            max_payload_bytes=max_payload_bytes, slo_latency=slo_latency,
            slo_target=slo_target, slo_success=slo_success, max_backlog=max_backlog,
            run_time_budget=run_time_budget,
            max_failure_rate=max_failure_rate, priority=priority, max_running=max_running,
            rate_limit=rate_limit, rate_period=rate_period, on_dead=on_dead,
            max_running_per_key=max_running_per_key).items()
            if v is not None}
        options["queue"] = queue or self.default_queue

        def register(handler: Handler) -> Handler:
            if kind in self.tasks:
                raise ValueError(f"kind {kind!r} is already registered")
            is_async = inspect.iscoroutinefunction(handler)
            where = executor or ("async" if is_async else "thread")
            if where == "thread" and is_async:
                raise ValueError(f"kind {kind!r}: an async def handler cannot use the thread "
                                 "executor")
            if where == "async" and not is_async:
                raise ValueError(f"kind {kind!r}: executor='async' needs an async def handler")
            if transactional and where != "thread":
                # ctx.tx is a blocking connection owned by the worker process.
                raise ValueError(f"kind {kind!r}: transactional kinds run on the thread "
                                 "executor only")
            self.tasks[kind] = Task(kind, handler, options["queue"], options, transactional,
                                    where)
            # The handler stays the same function (callable, importable by name for the
            # process executor); it gains the producer's side of its kind.
            handler.defer = functools.partial(self._defer, kind)
            handler.defer_async = functools.partial(self._defer_async, kind)
            return handler

        return register

    def periodic(self, cron: str, *, name: str | None = None, payload: dict | None = None,
                 timezone: str = "UTC", missed: str = "once",
                 kind: str | None = None) -> Callable[[Handler], Handler]:
        """Run a kind on a cron schedule: a job with ``payload`` at every tick of ``cron``
        (5 fields, or 6 with seconds first) in ``timezone``. Put it above ``@app.task`` to
        schedule that kind; alone, it declares a kind named ``kind`` (default: the
        function's name) with the default options. ``name`` (default: the kind) names the
        schedule; ``missed`` says what runs after downtime: ``"once"`` (the latest missed
        tick) or ``"skip"`` (nothing until the next tick). Workers upsert the schedules at
        start, with the kinds (docs/python.md, "Periodic jobs")."""
        from .names import NAME
        from .schedules import check

        cron = check(cron, timezone, missed)

        def register(handler: Handler) -> Handler:
            scheduled = next((t.kind for t in self.tasks.values() if t.handler is handler), None)
            if scheduled is None:
                scheduled = kind or handler.__name__
                self.task(scheduled)(handler)
            elif kind is not None and kind != scheduled:
                raise ValueError(f"@app.periodic(kind={kind!r}) sits on the handler of kind "
                                 f"{scheduled!r}: drop kind= or make them agree")
            schedule = name or scheduled
            if not NAME.fullmatch(schedule):
                raise ValueError(f"schedule name {schedule!r} is malformed: 1-128 of A-Z a-z "
                                 "0-9 _ . : / - starting with a letter or digit")
            if schedule in self.periodics:
                raise ValueError(f"schedule {schedule!r} is already declared: give the "
                                 "second one its own name=")
            self.periodics[schedule] = Periodic(schedule, cron, scheduled, dict(payload or {}),
                                                timezone, missed)
            return handler

        return register

    def declare_schedules(self, db, *, refused_ok: bool = False) -> list[str]:
        """``jobs.schedule`` for every ``@app.periodic``; returns the names stored. An
        operator's disable is kept (enabled is not passed), and schedules the app no longer
        declares are left alone: ``jobfence unschedule NAME`` removes one."""
        from .schedules import define

        stored = []
        for p in self.periodics.values():
            try:
                define(db, p.name, p.cron, p.kind, p.payload, timezone_name=p.timezone,
                       missed=p.missed)
            except psycopg.errors.InsufficientPrivilege:
                if not refused_ok:
                    raise
                log.warning("not allowed to declare schedule %s; assuming an administrator "
                            "did", p.name, extra={"event": "declare_skipped",
                                                  "fields": {"schedule": p.name}})
                continue
            stored.append(p.name)
        return stored

    @property
    def queues(self) -> list[str]:
        return sorted({t.queue for t in self.tasks.values()})

    def declare(self, db) -> dict[str, dict]:
        """``jobs.define_type`` for every kind; returns the stored definitions by kind.

        Without the right to declare (role jobs_worker only) the kinds must already exist;
        that is logged, not fatal, because an administrator may have declared them."""
        declared: dict[str, dict] = {}
        # A compensating kind must exist before the kinds that name it (jobs.define_type).
        for task in sorted(self.tasks.values(), key=lambda t: "on_dead" in t.options):
            try:
                declared[task.kind] = db.define_type(task.kind, **task.options)
            except psycopg.errors.InsufficientPrivilege:
                log.warning("not allowed to declare kind %s; assuming an administrator did",
                            task.kind, extra={"event": "declare_skipped",
                                              "fields": {"kind": task.kind}})
        self.declare_schedules(db, refused_ok=True)
        self.prepare(db, create=True)
        return declared

    def prepare(self, db, *, create: bool, for_handlers: bool = True) -> None:
        """The app's tables (created when ``create`` and allowed, else checked; with
        ``for_handlers``, checked writable by this login, as its handlers will) and its
        ``on_start`` hooks; ``app_setup.AppSetupError`` says what is missing, in one line."""
        from .app_setup import prepare_tables, run_start_hooks

        if self.tables:
            with db.connection() as conn:
                prepare_tables(self, conn, self.ref, create, for_handlers)
        if create:
            run_start_hooks(self, db)


_EVENT_LOCK = threading.Lock()


class JobLogger(logging.LoggerAdapter):
    """``ctx.log``: every line carries the job's id, lease version and worker."""

    def process(self, msg, kwargs):
        extra = kwargs.setdefault("extra", {})
        fields = dict(self.extra)
        fields.update(extra.pop("fields", {}))
        extra["fields"] = fields
        return msg, kwargs


class Context:
    """What a handler gets besides its job id and payload."""

    def __init__(self, lease: Lease, worker: str, logger: logging.Logger,
                 tx_factory: Callable[[], psycopg.Connection] | None = None,
                 progress: Callable[[Lease, Any], Any] | None = None):
        """``logger``: the kind's logger, which ``ctx.log`` wraps."""
        self.lease = lease
        self.job_id = lease.job_id
        self.kind = lease.kind
        self.queue = lease.queue
        self.attempt = lease.attempt
        self.worker = worker
        self._logger = logger
        self._log: JobLogger | None = None
        # Created on first wait only: a worker builds a context per job, most never wait.
        self._cancelled: threading.Event | None = None
        self.cancel_reason: str | None = None
        # Set by the executor that runs the handler (e.g. to cancel an asyncio task).
        self._on_cancel: Callable[[], None] | None = None
        self._tx_factory = tx_factory
        self._tx: psycopg.Connection | None = None
        self._progress = progress

    @property
    def log(self) -> JobLogger:
        """The kind's logger, every line carrying the job's id, lease version and worker.
        Built when first used: most handlers never log."""
        found = self._log
        if found is None:
            found = self._log = JobLogger(self._logger, {
                "job_id": self.job_id, "lease_version": self.lease.lease_version,
                "worker": self.worker, "kind": self.kind})
        return found

    # -- cancellation ---------------------------------------------------------------------
    def cancelled(self) -> bool:
        """True once the job should stop: operator cancel, timeout, lost lease or the
        worker's shutdown grace ran out. Check it at safe points."""
        return self.cancel_reason is not None

    def raise_if_cancelled(self) -> None:
        if self.cancel_reason is not None:
            raise Cancelled(self.cancel_reason)

    def sleep(self, seconds: float) -> None:
        """Sleep that wakes up at once on cancellation (then raises ``Cancelled``)."""
        event = self._cancelled
        if event is None:
            with _EVENT_LOCK:
                if self._cancelled is None:
                    self._cancelled = threading.Event()
                event = self._cancelled
        # _cancel sets the reason before it looks for the event: checking the reason after
        # the event exists cannot miss a cancel that came in between.
        if self.cancel_reason is not None or event.wait(max(0.0, seconds)):
            raise Cancelled(self.cancel_reason or "cancelled")

    async def asleep(self, seconds: float) -> None:
        """``asyncio.sleep`` for async handlers; a cancel, timeout or lost lease cancels the
        handler's task, so the sleep ends with ``asyncio.CancelledError``."""
        import asyncio

        self.raise_if_cancelled()
        await asyncio.sleep(max(0.0, seconds))

    def _cancel(self, reason: str) -> None:
        if self.cancel_reason is None:
            self.cancel_reason = reason
            with _EVENT_LOCK:
                event = self._cancelled
            if event is not None:
                event.set()
            hook = self._on_cancel
            if hook is not None:
                hook()

    # -- progress -------------------------------------------------------------------------
    def progress(self, value: Any) -> None:
        """Say how far the job got (any JSON value up to 64 KiB), for ``jobs.get``,
        ``jobfence status`` and the dashboard: one round trip (``jobs.progress``), which also
        extends the lease. Raises ``LeaseLost`` once the lease is no longer this worker's."""
        if self._progress is None:
            raise RuntimeError("ctx.progress needs a worker: this context was built without one")
        beat = self._progress(self.lease, value)
        if beat.cancel_requested:
            self._cancel("cancel_requested")

    async def aprogress(self, value: Any) -> None:
        """``progress`` for async handlers, off the event loop."""
        import asyncio

        await asyncio.to_thread(self.progress, value)

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


class AppLoadError(ValueError):
    """``--app`` names no App: the message says which part is wrong, for one line of CLI
    output (a usage error, never a traceback)."""


def load_app(ref: str, app_dir: str | None = ".") -> App:
    """``package.module:attr`` -> the App object. ``app_dir`` (the current directory by
    default, as uvicorn, Celery and RQ do) goes first on the import path, so a module next to
    the shell's working directory is found without installing it."""
    import importlib
    import os

    module_name, _, attr = ref.partition(":")
    if not module_name or not attr:
        raise AppLoadError(f"--app must look like MODULE:ATTR (e.g. myjobs:app), got {ref!r}")
    if app_dir is not None:
        path = os.path.abspath(app_dir)
        if path not in sys.path:
            sys.path.insert(0, path)
    try:
        obj = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and (module_name == exc.name or module_name.startswith(exc.name + ".")):
            raise AppLoadError(f"--app {ref}: no module named {exc.name!r} on the import path "
                               f"(searched {app_dir or 'the installed packages'} first; "
                               "see --app-dir)") from None
        # The module exists but imports something missing: that is its own error to name.
        raise AppLoadError(f"--app {ref}: importing {module_name} failed: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - the user's module: report what it raised, once
        raise AppLoadError(f"--app {ref}: importing {module_name} raised "
                           f"{type(exc).__name__}: {exc}") from None
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise AppLoadError(f"--app {ref}: {module_name} has no attribute {attr!r}") from None
    if not isinstance(obj, App):
        raise AppLoadError(f"--app {ref} is a {type(obj).__name__}, not a jobfence.App")
    return obj


def monotonic_deadline(wall_at) -> float:
    """Turn a server timestamp into a local monotonic deadline."""
    return time.monotonic() + (wall_at.timestamp() - time.time())
