"""The worker: pop ids from Redis, claim them in PostgreSQL, run handlers, report outcomes.

Threads: the main thread pops and claims; a pool of ``concurrency`` threads runs handlers;
one heartbeat thread extends leases (every lease/3), notices cancel requests and timeouts;
one completer thread batches successful results into ``jobs.complete_many``. PostgreSQL
decides every transition: the worker only reports, and pushes the signals that follow.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import queue as queue_mod
import signal
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable

import psycopg
import redis

from . import log as jlog
from .app import App, Context, Task, monotonic_deadline
from .db import Database
from .errors import Cancelled, JobfenceError, LeaseLost, NonRetryable
from .rows import Lease, Outcome
from .transport import Transport

logger = logging.getLogger("jobfence.worker")

# How long an outcome (complete/fail) is retried while PostgreSQL is unreachable. Past it the
# lease has long expired: the reaper requeues the job, so giving up loses nothing.
OUTCOME_RETRY_SECONDS = 60.0
# A long-running worker says how it is doing even when nothing goes wrong.
STATS_EVERY_SECONDS = 30.0


def default_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


class Backoff:
    """Exponential backoff with a cap, reset on success: reconnect without a crash loop."""

    def __init__(self, first: float = 0.1, cap: float = 5.0):
        self.first, self.cap, self.current = first, cap, first

    def next(self) -> float:
        delay, self.current = self.current, min(self.cap, self.current * 2)
        return delay

    def reset(self) -> None:
        self.current = self.first


@dataclass
class _Running:
    lease: Lease
    task: Task | None
    ctx: Context
    beat_every: float
    deadline: float
    next_beat: float
    finished: bool = False
    handler_done: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)


class Worker:
    def __init__(self, app: App, database_url: str, redis_url: str, *, name: str | None = None,
                 concurrency: int = 4, batch: int | None = None, queues: list[str] | None = None,
                 grace: float = 30.0, pop_timeout: float = 1.0, declare: bool = True):
        if not app.tasks:
            raise ValueError("the app declares no task")
        self.app = app
        self.name = name or default_name()
        self.concurrency = max(1, concurrency)
        self.batch = max(1, batch or self.concurrency)
        self.queues = queues or app.queues
        self.grace = grace
        self.pop_timeout = pop_timeout
        self.declare = declare
        self.db = Database(database_url, max_size=self.concurrency + 3, name="jobfence-worker")
        self.transport = Transport(redis_url, socket_timeout=pop_timeout + 5.0)
        self.types: dict[str, dict] = {}
        self._running: dict[int, _Running] = {}
        self._lock = threading.Condition()
        self._inflight = 0  # handler threads busy
        self._stop = threading.Event()
        self._hard_stop = threading.Event()
        self._threads_stop = threading.Event()
        self._completions: queue_mod.Queue = queue_mod.Queue()
        self._pool = ThreadPoolExecutor(self.concurrency, thread_name_prefix="jobfence-handler")
        # Paces the pop loop after claims that failed for reasons other than a lost server.
        self._claim_backoff = Backoff(first=0.5, cap=5.0)
        self.stats = {"claimed": 0, "completed": 0, "retried": 0, "failed": 0, "lost": 0}
        self._stats_lock = threading.Lock()

    # -- lifecycle ------------------------------------------------------------------------
    def install_signal_handlers(self) -> None:
        def on_signal(signum, _frame):
            if self._stop.is_set():
                # A second signal: do not wait for the grace period, hand jobs back now.
                self._hard_stop.set()
            self._stop.set()
            self._event(logging.INFO, "stopping", f"{signal.Signals(signum).name}: no new work, "
                        f"draining {len(self._running)} job(s)", signal=signal.Signals(signum).name)

        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)

    def stop(self) -> None:
        self._stop.set()

    def run(self) -> int:
        """Work until stopped; returns the process exit code (0 after a clean drain)."""
        self._wait_for_declare()
        if self._stop.is_set():
            return self._shutdown()
        beats = threading.Thread(target=self._heartbeat_loop, name="jobfence-heartbeat", daemon=True)
        completer = threading.Thread(target=self._complete_loop, name="jobfence-completer", daemon=True)
        beats.start()
        completer.start()
        self._event(logging.INFO, "worker_ready", "worker ready", queues=self.queues,
                    concurrency=self.concurrency, batch=self.batch,
                    kinds=sorted(self.app.tasks))
        try:
            self._pop_loop()
        finally:
            code = self._shutdown()
            self._threads_stop.set()
            beats.join(timeout=2)
            completer.join(timeout=2)
            self._pool.shutdown(wait=False, cancel_futures=True)
            with contextlib.suppress(Exception):
                self.db.close()
            with contextlib.suppress(Exception):
                self.transport.close()
        return code

    def _wait_for_declare(self) -> None:
        backoff = Backoff()
        while not self._stop.is_set():
            try:
                self.types = self.app.declare(self.db) if self.declare else {}
                return
            except psycopg.OperationalError as exc:
                delay = backoff.next()
                self._event(logging.WARNING, "db_unavailable",
                            f"cannot declare kinds yet; retrying in {delay:.1f}s", error=str(exc))
                self._stop.wait(delay)

    def _shutdown(self) -> int:
        """Wait for in-flight jobs within the grace period, then hand back what is left."""
        deadline = time.monotonic() + self.grace
        with self._lock:
            while self._running and time.monotonic() < deadline and not self._hard_stop.is_set():
                self._lock.wait(timeout=0.1)
            # Jobs whose handler already returned only wait for the completer: give it a
            # moment rather than turning a finished job into a retry.
            flush_deadline = time.monotonic() + 5.0
            while (any(r.handler_done and not r.finished for r in self._running.values())
                   and time.monotonic() < flush_deadline):
                self._lock.wait(timeout=0.05)
            left = [r for r in self._running.values() if not r.finished and not r.handler_done]
        for running in left:
            running.ctx._cancel("shutdown")
            self._report_failure(running, "worker shutdown", retryable=True)
        self._event(logging.INFO, "worker_stopped", "worker stopped", handed_back=len(left),
                    **self.stats)
        return 0

    # -- popping and claiming -------------------------------------------------------------
    def _pop_loop(self) -> None:
        backoff = Backoff()
        next_move = 0.0
        next_stats = time.monotonic() + STATS_EVERY_SECONDS
        while not self._stop.is_set():
            if time.monotonic() >= next_stats:
                next_stats = time.monotonic() + STATS_EVERY_SECONDS
                self._event(logging.INFO, "worker_stats", "progress", running=len(self._running),
                            **self.stats)
            with self._lock:
                free = self.concurrency - self._inflight
                if free <= 0:
                    self._lock.wait(timeout=0.2)
                    continue
            try:
                now = time.monotonic()
                if now >= next_move:
                    # Retries wait in the delayed set; moving the due ones here too keeps
                    # backoff precise without waiting for the reaper's next tick.
                    for q in self.queues:
                        self.transport.move_due(q)
                    next_move = now + 0.5
                ids = self.transport.pop(self.queues, min(self.batch, free), self.pop_timeout)
                backoff.reset()
            except redis.RedisError as exc:
                delay = backoff.next()
                self._event(logging.WARNING, "redis_unavailable",
                            f"cannot pop; retrying in {delay:.1f}s", error=str(exc))
                self._stop.wait(delay)
                continue
            if not ids:
                continue
            try:
                self._claim_and_start(list(dict.fromkeys(ids)))
            except Exception as exc:  # noqa: BLE001 - a crash loop would stall every queue
                # Last line of defence: the popped ids are only signals. PostgreSQL still
                # holds the jobs and the reaper re-pushes them; keep serving the rest.
                delay = self._claim_backoff.next()
                logger.error("unexpected error after a pop; signals dropped, retrying in "
                             f"{delay:.1f}s", exc_info=True,
                             extra={"event": "worker_error",
                                    "fields": {"worker": self.name, "job_ids": ids[:20],
                                               "error": f"{type(exc).__name__}: {exc}"}})
                self._stop.wait(delay)

    def _claim_and_start(self, ids: list[int]) -> None:
        backoff = Backoff()
        pause = 0.0
        while True:
            try:
                leases = self.db.claim_many(ids, self.name)
                self._claim_backoff.reset()
                break
            except psycopg.OperationalError as exc:
                if self._stop.is_set():
                    # The ids stay queued in PostgreSQL: the reaper re-pushes them.
                    return
                delay = backoff.next()
                self._event(logging.WARNING, "db_unavailable",
                            f"claim failed; retrying in {delay:.1f}s", error=str(exc),
                            job_ids=ids[:20])
                self._stop.wait(delay)
            except (psycopg.Error, JobfenceError) as exc:
                leases, pause = self._claim_isolating(ids, exc)
                break
        for lease in leases:
            self._count("claimed")
            self._start(lease)
        if pause:
            # After starting what was claimed: its lease clock is already running.
            self._stop.wait(pause)

    def _claim_isolating(self, ids: list[int], exc: Exception) -> tuple[list[Lease], float]:
        """claim_many raised a server error that retrying will not cure (e.g. 22008 from a
        job whose intervals overflow a timestamp). Claim the ids one at a time so one bad
        job does not take its batch-mates down with it, drop the signals of those that
        still fail (PostgreSQL keeps the jobs; the reaper's stale re-push brings them back),
        and back off briefly (the returned pause) so a poison job cannot become a hot loop."""
        self._event(logging.ERROR, "claim_failed",
                    f"claim_many failed for {len(ids)} id(s): {_describe(exc)}",
                    sqlstate=_sqlstate(exc), error=str(exc).strip()[:2000], job_ids=ids[:50])
        leases: list[Lease] = []
        dropped: dict[int, str | None] = {}
        if len(ids) > 1:
            for pos, job_id in enumerate(ids):
                try:
                    leases += self.db.claim_many([job_id], self.name)
                except psycopg.OperationalError:
                    dropped.update((i, None) for i in ids[pos:])  # server away: reaper re-pushes
                    break
                except (psycopg.Error, JobfenceError) as single:
                    dropped[job_id] = _sqlstate(single)
        else:
            dropped = {ids[0]: _sqlstate(exc)}
        if dropped:
            delay = self._claim_backoff.next()
            self._event(logging.ERROR, "signals_dropped",
                        f"dropped the signals of {len(dropped)} job(s) that cannot be claimed; "
                        f"they stay in PostgreSQL and the reaper re-pushes them; pausing "
                        f"{delay:.1f}s", job_ids=list(dropped)[:50],
                        sqlstates=sorted({s for s in dropped.values() if s}) or None)
            return leases, delay
        self._claim_backoff.reset()
        return leases, 0.0

    def _start(self, lease: Lease) -> None:
        task = self.app.tasks.get(lease.kind)
        fields = {"job_id": lease.job_id, "lease_version": lease.lease_version,
                  "worker": self.name, "kind": lease.kind}
        adapter = _JobLogger(logging.getLogger(f"jobfence.task.{lease.kind}"), fields)
        tx_factory = None
        stack = contextlib.ExitStack()
        if task is not None and task.transactional:
            def tx_factory() -> psycopg.Connection:
                conn = stack.enter_context(self.db.connection())
                stack.enter_context(conn.transaction())
                return conn
        ctx = Context(lease, self.name, adapter, tx_factory)
        type_row = self.types.get(lease.kind) or {}
        lease_timeout = type_row.get("lease_timeout")
        if lease_timeout is not None:
            beat_every = lease_timeout.total_seconds() / 3
        else:
            beat_every = (lease.lease_expires_at.timestamp() - time.time()) / 3
        beat_every = max(0.1, beat_every)
        running = _Running(lease, task, ctx, beat_every, monotonic_deadline(lease.timeout_at),
                           time.monotonic() + beat_every)
        with self._lock:
            self._running[lease.job_id] = running
            self._inflight += 1
        self._event(logging.INFO, "claimed", "job claimed", queue=lease.queue,
                    attempt=lease.attempt, **fields)
        self._pool.submit(self._execute, running, stack)

    # -- running a handler ----------------------------------------------------------------
    def _execute(self, running: _Running, stack: contextlib.ExitStack) -> None:
        lease, task, ctx = running.lease, running.task, running.ctx
        try:
            if task is None:
                self._report_failure(running, f"no handler for kind {lease.kind!r} on worker "
                                     f"{self.name}", retryable=True)
                return
            started = time.monotonic()
            outcome = None
            with stack:
                result = task.handler(lease.job_id, lease.payload, ctx)
                json.dumps(result)  # fail here, as the handler's error, not in the batch
                if task.transactional:
                    outcome = self._complete_in_transaction(running, ctx, result)
            if outcome is None:
                self._completions.put((running, result, started))
            else:
                # Only now is the completion committed: signals pushed earlier could be
                # popped before the jobs they wake are claimable, and be wasted.
                self._finish(running, outcome, started)
        except _LostAtComplete:
            pass  # logged by _complete_in_transaction; the rollback took the effects back
        except NonRetryable as exc:
            self._report_failure(running, f"{type(exc).__name__}: {exc}", retryable=False)
        except Cancelled as exc:
            reason = ctx.cancel_reason or str(exc)
            # An operator cancel is final; a shutdown hand-back or a timeout retries.
            self._report_failure(running, "cancelled" if reason == "cancel_requested" else reason,
                                 retryable=reason != "cancel_requested")
        except Exception as exc:  # noqa: BLE001 - any handler error is the job's failure
            self._report_failure(running, f"{type(exc).__name__}: {exc}"[:2000], retryable=True)
        finally:
            with self._lock:
                running.handler_done = True
                self._inflight -= 1
                self._lock.notify_all()

    def _complete_in_transaction(self, running: _Running, ctx: Context, result: Any) -> Outcome:
        """``jobs.complete`` on the handler's own transaction (committed by the caller). A
        connection failure here propagates as a handler failure: the transaction is gone, so
        neither the effects nor the completion were committed and a retry is right."""
        lease = running.lease
        with running.lock:
            if running.finished:
                # We already failed it (timeout/shutdown): leaving the block rolls back.
                raise _Discard()
        try:
            return self.db.complete(lease.job_id, self.name, lease.lease_version, result,
                                    conn=ctx.tx)
        except LeaseLost as exc:
            self._lease_lost(running, exc, "complete")
            raise _LostAtComplete() from exc  # leaving the block rolls the writes back

    # -- outcomes -------------------------------------------------------------------------
    def _complete_loop(self) -> None:
        while not (self._threads_stop.is_set() and self._completions.empty()):
            try:
                first = self._completions.get(timeout=0.1)
            except queue_mod.Empty:
                continue
            batch = [first]
            while len(batch) < 200:
                try:
                    batch.append(self._completions.get_nowait())
                except queue_mod.Empty:
                    break
            live = []
            for item in batch:
                with item[0].lock:
                    if not item[0].finished:
                        live.append(item)
            if not live:
                continue
            items = [(r.lease.job_id, r.lease.lease_version, res) for r, res, _ in live]
            outcomes = self._with_retry(lambda: self.db.complete_many(items, self.name),
                                        "complete_many")
            if outcomes is None:
                for running, _, _ in live:
                    self._forget(running)
                continue
            by_id = {o.job_id: o for o in outcomes}
            for running, _, started in live:
                outcome = by_id.get(running.lease.job_id)
                if outcome is None or not outcome.accepted:
                    self._lease_lost(running, None, "complete_many")
                else:
                    self._finish(running, outcome, started)

    def _report_failure(self, running: _Running, error: str, *, retryable: bool) -> None:
        with running.lock:
            if running.finished:
                return
        lease = running.lease
        try:
            outcome = self._with_retry(lambda: self.db.fail(
                lease.job_id, self.name, lease.lease_version, error, retryable), "fail")
        except LeaseLost as exc:
            self._lease_lost(running, exc, "fail")
            return
        if outcome is None:
            self._forget(running)
            return
        self._finish(running, outcome, None, error=error)

    def _with_retry(self, call: Callable[[], Any], what: str):
        """Retry a call through connection failures; None when PostgreSQL stayed away past
        OUTCOME_RETRY_SECONDS (the reaper then recovers the job)."""
        backoff = Backoff()
        deadline = time.monotonic() + OUTCOME_RETRY_SECONDS
        while True:
            try:
                return call()
            except psycopg.OperationalError as exc:
                if time.monotonic() >= deadline or self._hard_stop.is_set():
                    self._event(logging.ERROR, "db_unavailable",
                                f"{what} abandoned; the reaper will recover the job(s)",
                                error=str(exc))
                    return None
                delay = backoff.next()
                self._event(logging.WARNING, "db_unavailable",
                            f"{what} failed; retrying in {delay:.1f}s", error=str(exc))
                time.sleep(delay)

    def _finish(self, running: _Running, outcome: Outcome, started: float | None,
                error: str | None = None) -> None:
        with running.lock:
            if running.finished:
                return
            running.finished = True
        lease = running.lease
        signals = []
        if outcome.status == "queued":
            signals.append((lease.job_id, lease.queue, outcome.run_after))
        for woken in outcome.wake or ():
            try:
                job = self.db.get(woken)
                signals.append((job.id, job.queue, job.run_after))
            except (JobfenceError, psycopg.OperationalError) as exc:
                self._event(logging.WARNING, "wake_lookup_failed",
                            "could not look up a woken job; the reaper's sweep signals it later",
                            woken=woken, error=str(exc), **self._fields(lease))
        if signals:
            try:
                self.transport.push(signals)
            except redis.RedisError as exc:
                self._event(logging.WARNING, "push_failed",
                            "could not signal follow-up jobs; the reaper re-pushes them",
                            error=str(exc), **self._fields(lease))
        fields = self._fields(lease)
        if started is not None:
            fields["duration_ms"] = round((time.monotonic() - started) * 1000, 1)
        if outcome.status == "done":
            self._count("completed")
            self._event(logging.INFO, "completed", "job done", wake=outcome.wake or None, **fields)
        elif outcome.status == "queued":
            self._count("retried")
            self._event(logging.INFO, "retry_scheduled", "job failed, retry scheduled",
                        error=error, run_after=outcome.run_after, **fields)
        else:
            self._count("failed")
            self._event(logging.WARNING, "failed", f"job {outcome.status}", error=error,
                        status=outcome.status, **fields)
        self._forget(running)

    def _lease_lost(self, running: _Running, exc: Exception | None, where: str) -> None:
        self._count("lost")
        running.ctx._cancel("lease_lost")
        self._event(logging.WARNING, "lease_lost",
                    f"{where} rejected: lease lost (JB001); the result is discarded",
                    sqlstate="JB001", error=str(exc) if exc else None, **self._fields(running.lease))
        with running.lock:
            running.finished = True
        self._forget(running)

    def _forget(self, running: _Running) -> None:
        with running.lock:
            running.finished = True
        with self._lock:
            self._running.pop(running.lease.job_id, None)
            self._lock.notify_all()

    # -- heartbeats, timeouts, cancel -----------------------------------------------------
    def _heartbeat_loop(self) -> None:
        while not self._threads_stop.wait(0.05):
            now = time.monotonic()
            with self._lock:
                current = list(self._running.values())
            for running in current:
                if running.finished:
                    continue
                if now >= running.deadline:
                    self._timeout(running)
                elif now >= running.next_beat:
                    self._beat(running)

    def _beat(self, running: _Running) -> None:
        lease = running.lease
        try:
            beat = self.db.heartbeat(lease.job_id, self.name, lease.lease_version)
        except LeaseLost:
            # The job was reaped or reassigned: tell the handler; its result will be
            # rejected by PostgreSQL when it reports.
            running.ctx._cancel("lease_lost")
            running.next_beat = float("inf")
            self._event(logging.WARNING, "heartbeat_lost", "heartbeat rejected: lease lost",
                        sqlstate="JB001", **self._fields(lease))
            return
        except (JobfenceError, psycopg.Error) as exc:
            running.next_beat = time.monotonic() + min(0.5, running.beat_every)
            self._event(logging.WARNING, "heartbeat_failed", "heartbeat failed",
                        error=str(exc), **self._fields(lease))
            return
        running.next_beat = time.monotonic() + running.beat_every
        if beat.cancel_requested and not running.ctx.cancelled():
            running.ctx._cancel("cancel_requested")
            self._event(logging.INFO, "cancel_requested", "cancel requested: telling the handler",
                        **self._fields(lease))
        if not beat.alive:
            self._timeout(running)

    def _timeout(self, running: _Running) -> None:
        running.deadline = float("inf")
        running.ctx._cancel("timeout")
        self._event(logging.WARNING, "timeout", "job passed its timeout; failing it",
                    **self._fields(running.lease))
        self._report_failure(running, "timeout", retryable=True)

    # -- helpers --------------------------------------------------------------------------
    def _count(self, name: str) -> None:
        with self._stats_lock:
            self.stats[name] += 1

    def _fields(self, lease: Lease) -> dict:
        return {"job_id": lease.job_id, "lease_version": lease.lease_version,
                "worker": self.name, "kind": lease.kind}

    def _event(self, level: int, name: str, msg: str, **fields: Any) -> None:
        fields.setdefault("worker", self.name)
        jlog.event(logger, level, name, msg, **fields)


def _sqlstate(exc: Exception) -> str | None:
    return getattr(exc, "sqlstate", None)


def _describe(exc: Exception) -> str:
    diag = getattr(exc, "diag", None)
    text = (getattr(diag, "message_primary", None) if diag else None) or str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}".rstrip(": ")


class _LostAtComplete(Exception):
    """JB001 at a transactional completion: already logged, nothing left to report."""


class _Discard(Exception):
    """Leaves a transactional block so its writes roll back without a failure report."""


class _JobLogger(logging.LoggerAdapter):
    def process(self, msg, kwargs):
        extra = kwargs.setdefault("extra", {})
        fields = dict(self.extra)
        fields.update(extra.pop("fields", {}))
        extra["fields"] = fields
        return msg, kwargs
