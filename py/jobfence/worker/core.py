"""The worker: claim in batches, run many, report in batches.

Rooms, each with one job and its own thread:

- ``Claimer`` (the main thread): pops ids from Redis and claims them with one
  ``jobs.claim_many`` per batch, within the claim budget (``concurrency + prefetch`` jobs
  claimed and not yet returned by their handler);
- executors: ``ThreadExecutor`` (sync handlers), ``AsyncExecutor`` (``async def`` handlers
  on one event loop), ``ProcessExecutor`` (kinds that need a hard kill at the timeout);
- ``LeaseKeeper``: one ``jobs.heartbeat_many`` per tick for every due lease, on its own
  pool with a statement timeout; timeouts, cancel requests, lost leases, the stats line;
- ``Reporter``: ``jobs.complete_many`` + ``jobs.fail_many`` in one round trip per flush,
  then the retry and wake-up signals in one Redis pipeline.

PostgreSQL decides every transition: the worker only reports, and pushes the signals that
follow.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import os
import signal
import threading
import time
from datetime import timedelta
from typing import Any

import psycopg
import redis

from ..app import App
from ..app_setup import AppSetupError
from ..jsonload import UndecodedJson
from .. import tracing
from ..tracing import worker_tracer
from ..transport import Transport
from .claimer import Claimer
from ..retry import Backoff
from .common import RUNNING, Job, default_name, event
from .executor import AsyncExecutor, Outcomes, ThreadExecutor
from .leasedb import LeaseDatabase
from .leases import LeaseKeeper
from .processes import ProcessExecutor
from .reporter import FAIL, FAIL_RET, GONE, Reporter

# Handlers in flight. Jobs are mostly I/O-bound (HTTP calls, queries, mail): a few dozen
# threads keep a process busy waiting on the network without costing much memory.
DEFAULT_CONCURRENCY = 32
# Ids popped and claimed per round trip.
DEFAULT_BATCH = 100
# How long the reporter waits for more outcomes before a flush that is not full: short
# enough to be invisible in a job's latency, long enough to gather a batch under load.
DEFAULT_LINGER = 0.002
STATS_EVERY_SECONDS = 15.0


def default_prefetch(concurrency: int, batch: int) -> int:
    """One whole batch may wait while the one before it runs: the next claim, its round trip
    and its commit, overlap the handlers instead of following them. A batch larger than the
    handlers already has jobs waiting (68 of 100 with 32 handlers), so those come on top:
    with a budget of only ``concurrency + batch`` the next claim could not be made until the
    current batch had nearly drained, and the handlers would sit out every claim's round
    trip (docs/performance.md, "A batch claimed while the one before runs")."""
    return batch + max(0, batch - concurrency)


def settle_collector() -> None:
    """For a process that is a worker and nothing else (``jobfence worker``), once its app
    is loaded: what exists now (modules, the app, the drivers) lives as long as the process.
    Frozen, it is out of the cyclic collector's sight, so the collections the per-job objects
    set off no longer walk all of it; a young generation of 10,000 lets a batch's objects die
    before a collection sees them. Measured with ``gc.callbacks`` on one worker draining
    60,000 no-op jobs: 3.4 us of collection per job with the defaults, 2.0 frozen, 0.9 frozen
    with these thresholds (docs/performance.md, "The worker's own CPU"). Not done by
    ``Worker.run``: a process that embeds a worker keeps its own collector settings."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(10_000, 20, 20)


# The exit code of a process PostgreSQL refuses for good (docs/cli.md, exit 6), and of a
# worker whose app cannot run under its login (a table, a privilege, a start hook: exit 1).
EXIT_DB_REFUSED = 6
EXIT_APP_SETUP = 1


# After the grace, the time the last outcomes (the hand-backs) are given to reach PostgreSQL.
FLUSH_AFTER_GRACE = 3.0


class DatabaseRefused(Exception):
    def __init__(self, cause: psycopg.OperationalError):
        super().__init__(str(cause))
        self.cause = cause


class Worker:
    def __init__(self, app: App, database_url: str, redis_url: str, *, name: str | None = None,
                 concurrency: int = DEFAULT_CONCURRENCY, batch: int | None = None,
                 queues: list[str] | None = None, grace: float = 30.0, pop_timeout: float = 1.0,
                 declare: bool = True, prefetch: int | None = None,
                 processes: int | None = None, linger: float = DEFAULT_LINGER,
                 max_hung: int | None = None, stats_every: float = STATS_EVERY_SECONDS):
        if not app.tasks:
            raise ValueError("the app declares no task")
        self.app = app
        self.name = name or default_name()
        self.concurrency = max(1, concurrency)
        self.batch = max(1, batch or DEFAULT_BATCH)
        self.prefetch = default_prefetch(self.concurrency, self.batch) if prefetch is None \
            else max(0, prefetch)
        self.capacity = self.concurrency + self.prefetch
        self.queues = queues or app.queues
        self.grace = grace
        self.pop_timeout = pop_timeout
        self.declare = declare
        self.database_url = database_url
        kinds = list(app.tasks.values())
        transactional = any(t.transactional for t in kinds)
        self.db = LeaseDatabase(database_url, name="jobfence-worker",
                           max_size=3 + (self.concurrency if transactional else 0))
        self.lease_db: LeaseDatabase | None = None
        # The deployment's key prefix, asked once PostgreSQL answers (jobs.redis_namespace).
        self.transport = Transport(redis_url, socket_timeout=pop_timeout + 5.0,
                                   namespace=self.db.redis_namespace)
        self.types: dict[str, dict] = {}
        self.held: dict[int, Job] = {}
        self._stop = threading.Event()
        self._hard_stop = threading.Event()
        # Set by the first stop: when the grace ends, whatever PostgreSQL is doing.
        self._stop_deadline: float | None = None
        self.reporter = Reporter(self, flush_size=self.batch, linger=linger)
        self.claimer = Claimer(self)
        self.outcomes = Outcomes(self)
        self.threads = ThreadExecutor(self, self.outcomes, self.concurrency,
                                      self.concurrency if max_hung is None else max(0, max_hung))
        self.aio = AsyncExecutor(self, self.outcomes, self.concurrency) \
            if any(t.executor == "async" for t in kinds) else None
        process_kinds = [t for t in kinds if t.executor == "process"]
        self.processes = ProcessExecutor(
            self, self.outcomes, processes or min(self.concurrency, os.cpu_count() or 2),
            process_kinds) if process_kinds else None
        self.keeper: LeaseKeeper | None = None
        # After the app was imported: its module is where a tracer provider is set.
        self.tracer = worker_tracer(self.name)
        self.stats_every = stats_every
        self._last_stats = (time.monotonic(), 0)

    # -- lifecycle ------------------------------------------------------------------------
    def install_signal_handlers(self) -> None:
        def on_signal(signum, _frame):
            if self._stop.is_set():
                # A second signal: do not wait for the grace period, hand jobs back now.
                self._hard_stop.set()
            self.stop()
            event(logging.INFO, "stopping", f"{signal.Signals(signum).name}: no new work, "
                  f"draining {self.claimer.active()} job(s)", signal=signal.Signals(signum).name,
                  worker=self.name)

        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)

    def stop(self) -> None:
        if self._stop_deadline is None:
            self._stop_deadline = time.monotonic() + self.grace
        self._stop.set()
        self.claimer.freed.set()

    def stopping(self) -> bool:
        return self._stop.is_set()


    def out_of_time(self) -> bool:
        """Stopping and the grace is spent (or a second signal came): retrying a report
        now would keep the process past what docs/cli.md promises."""
        if self._hard_stop.is_set():
            return True
        deadline = self._stop_deadline
        return deadline is not None and time.monotonic() >= deadline

    def wait_stop(self, seconds: float) -> None:
        self._stop.wait(seconds)

    def run(self) -> int:
        """Work until stopped; returns the process exit code (0 after a clean drain)."""
        started: list[Any] = []
        code = 0
        try:
            try:
                self._wait_for_declare()
            except DatabaseRefused as refused:
                event(logging.ERROR, "db_refused",
                      "PostgreSQL refused the worker's login for good; not retrying: "
                      + " ".join(str(refused.cause).split()), worker=self.name)
                return EXIT_DB_REFUSED
            except AppSetupError as exc:
                event(logging.ERROR, "app_setup_failed", str(exc), worker=self.name)
                return EXIT_APP_SETUP
            if self._stop.is_set():
                event(logging.INFO, "worker_stopped", "worker stopped", handed_back=0,
                      worker=self.name, **self.stats)
                return 0
            self.lease_db = LeaseDatabase(self.database_url, name="jobfence-worker-leases",
                                     max_size=1, timeout=1.0,
                                     statement_timeout=self._beat_statement_timeout())
            self.keeper = LeaseKeeper(self, self.lease_db, stats_every=self.stats_every)
            for room in (self.reporter, self.keeper, self.threads, self.aio, self.processes):
                if room is not None:
                    room.start()
                    started.append(room)
            if not self._wait_for_redis():
                code = self._shutdown()
                return code
            event(logging.INFO, "worker_ready", "worker ready", queues=self.queues,
                  concurrency=self.concurrency, batch=self.batch, prefetch=self.prefetch,
                  processes=len(self.processes.slots) if self.processes else 0,
                  kinds=sorted(self.app.tasks), worker=self.name)
            self.claimer.run()
            code = self._shutdown()
        finally:
            for room in (self.threads, self.aio, self.processes):
                if room is not None and room in started:
                    with contextlib.suppress(Exception):
                        room.stop()
            if self.keeper is not None and self.keeper in started:
                self.keeper.stop()
            for closing in (self.db, self.lease_db, self.transport):
                if closing is not None:
                    with contextlib.suppress(Exception):
                        closing.close()
        return code

    def _wait_for_redis(self) -> bool:
        """Ready means able to take work: Redis answers. False when stopped meanwhile."""
        backoff = Backoff()
        while not self._stop.is_set():
            try:
                self.transport.ping()
                return True
            except redis.RedisError as exc:
                delay = backoff.next()
                event(logging.WARNING, "redis_unavailable",
                      f"cannot reach Redis yet; retrying in {delay:.1f}s", error=str(exc),
                      worker=self.name)
                self._stop.wait(delay)
        return False

    def _wait_for_declare(self) -> None:
        backoff = Backoff()
        while not self._stop.is_set():
            # One direct attempt first: a missing database or a refused login is said at
            # once, in libpq's words, instead of after the pool's timeout.
            cause = self.db.why_unreachable()
            if cause is not None and self.db.permanent(cause):
                raise DatabaseRefused(cause)
            if cause is not None:
                delay = backoff.next()
                event(logging.WARNING, "db_unavailable",
                      f"cannot reach PostgreSQL yet; retrying in {delay:.1f}s",
                      error=" ".join(str(cause).split()), worker=self.name)
                self._stop.wait(delay)
                continue
            try:
                if self.declare:
                    self.types = self.app.declare(self.db)
                else:
                    self.types = {}
                    self.app.prepare(self.db, create=False)
                if len(self.types) < len(self.app.tasks):
                    with contextlib.suppress(psycopg.Error):
                        self.types = {**self.db.types(), **self.types}
                _ = self.transport.namespace  # asked now, while PostgreSQL answers
                return
            except psycopg.OperationalError as exc:
                delay = backoff.next()
                event(logging.WARNING, "db_unavailable",
                      f"cannot declare kinds yet; retrying in {delay:.1f}s", error=str(exc),
                      worker=self.name)
                self._stop.wait(delay)

    def _beat_statement_timeout(self) -> float:
        """A heartbeat that does not answer within a quarter of the shortest lease is given
        up and retried: waiting longer would let the leases it refreshes expire."""
        leases = [row.get("lease_timeout") for kind, row in self.types.items()
                  if kind in self.app.tasks and row]
        seconds = [v.total_seconds() if isinstance(v, timedelta) else float(v)
                   for v in leases if v is not None]
        return min(5.0, max(0.5, min(seconds) / 4)) if seconds else 2.0

    def _shutdown(self) -> int:
        """Hand back jobs that never started, give running ones the grace period, then hand
        back what is left and flush the outcomes."""
        handed = 0
        for room in (self.threads, self.aio, self.processes):
            if room is None:
                continue
            for job in room.drain():
                if job.take():
                    handed += 1
                    if job.span is not None:
                        tracing.failed(job, "worker shutdown", True)
                    self.reporter.add(FAIL_RET, job, "worker shutdown", True)
                else:
                    if job.span is not None:
                        tracing.dropped(job)
                    self.reporter.add(GONE, job)
        if self._stop_deadline is None:
            self._stop_deadline = time.monotonic() + self.grace
        deadline = self._stop_deadline
        while (self.claimer.active() > 0 and time.monotonic() < deadline
               and not self._hard_stop.is_set()):
            self.claimer.freed.wait(0.1)
            self.claimer.freed.clear()
        for job in list(self.held.values()):
            if job.state == RUNNING and job.take():
                handed += 1
                job.ctx._cancel("shutdown")
                # Ended here: the handler may outlive the process's last flush.
                if job.span is not None:
                    tracing.failed(job, "worker shutdown", True)
                self.reporter.add(FAIL, job, "worker shutdown", True)
        # The hand-backs need one round trip; with PostgreSQL away they cannot be made, and
        # the reaper recovers those jobs when their leases expire.
        if not self.reporter.stop(timeout=max(FLUSH_AFTER_GRACE, deadline - time.monotonic())):
            event(logging.ERROR, "report_unfinished",
                  "outcomes still unreported at exit; the reaper recovers those jobs",
                  worker=self.name)
        event(logging.INFO, "worker_stopped", "worker stopped", handed_back=handed,
              worker=self.name, **self.stats)
        return 0

    # -- shared by the rooms --------------------------------------------------------------
    def dispatch(self, jobs: list[Job]) -> None:
        sync, aio, procs = [], [], []
        for job in jobs:
            task = job.task
            if task is None:
                self.outcomes.failed(job, f"no handler for kind {job.lease.kind!r} on worker "
                                     f"{self.name}", True)
            elif isinstance(job.lease.payload, UndecodedJson):
                # Stored before the SQL refused such values, or written past it: no attempt
                # would read it better, and its batch-mates run as usual.
                self.outcomes.failed(job, f"payload cannot be decoded: {job.lease.payload.reason}",
                                     False)
            elif task.executor == "thread":
                sync.append(job)
            elif task.executor == "async":
                aio.append(job)
            else:
                procs.append(job)
        if sync:
            self.threads.submit(sync)
        if aio:
            self.aio.submit(aio)
        if procs:
            self.processes.submit(procs)

    def forget(self, job: Job) -> None:
        job.finished = True
        self.held.pop(job.job_id, None)

    def timed_out(self, job: Job) -> None:
        if job.task is not None and job.task.executor == "thread":
            self.threads.note_hung(job)

    @property
    def stats(self) -> dict:
        out = {"claimed": self.claimer.claimed}
        out.update(self.reporter.stats)
        if self.keeper is not None:
            out["timeouts"] = self.keeper.stats["timeouts"]
            out["beat_failures"] = self.keeper.stats["beat_failures"]
        out["hung"] = self.threads.hung
        return out

    def log_stats(self) -> None:
        stats = self.stats
        now = time.monotonic()
        finished = stats["completed"] + stats["failed"] + stats["retried"]
        then, before = self._last_stats
        self._last_stats = (now, finished)
        rate = (finished - before) / (now - then) if now > then else 0.0
        event(logging.INFO, "worker_stats", "progress", jobs_per_s=round(rate, 1),
              in_flight=self.claimer.active(), held=len(self.held), worker=self.name, **stats)
