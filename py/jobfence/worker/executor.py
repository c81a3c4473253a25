"""Running handlers: sync ones on threads, ``async def`` ones on an event loop.

Threads take jobs from one deque. An idle thread is woken only when work is waiting and no
other wake-up is already under way; a woken thread that finds more work wakes the next one.
So a burst of quick jobs is drained by one or two threads without a context switch per job,
while slow (I/O-bound) jobs still spread over every thread.

Python threads cannot be killed. A handler still running past its timeout has its job
failed with ``timeout`` by the lease keeper; its thread is counted as hung and a
replacement thread takes its place (at most ``max_hung`` extra), so later jobs do not wait
for it. Kinds that need a hard stop use the process executor (``processes.py``).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import threading
import time
from typing import Any

from .. import tracing
from ..errors import Cancelled, LeaseLost, NonRetryable, Snooze
from .common import RETURNED, RUNNING, Host, Job, encode_result, event, logger
from .reporter import DONE, FAIL_RET, GONE, LOST_RET, OK, SNOOZE


def failure_of(job: Job, exc: BaseException, worker: str) -> tuple[str, bool]:
    """(error, retryable) for what a handler raised."""
    if isinstance(exc, NonRetryable):
        return f"{type(exc).__name__}: {exc}"[:2000], False
    if isinstance(exc, (Cancelled, asyncio.CancelledError)) and job.ctx.cancel_reason:
        reason = job.ctx.cancel_reason
        # An operator cancel is final; a shutdown hand-back or a timeout retries.
        return ("cancelled", False) if reason == "cancel_requested" else (reason, True)
    error = f"{type(exc).__name__}: {exc}".rstrip(": ")[:2000]
    if not isinstance(exc, Exception):
        # SystemExit, KeyboardInterrupt, GeneratorExit, a stray CancelledError...: the
        # handler did not return, so this is its failure; the worker itself keeps going.
        logger.warning("handler raised %s; failing the job with it", type(exc).__name__,
                       exc_info=exc, extra={"event": "handler_crashed",
                                            "fields": dict(job.fields(worker), error=error)})
    elif logger.isEnabledFor(logging.DEBUG):
        logger.debug("handler failed", exc_info=exc,
                     extra={"event": "handler_failed",
                            "fields": dict(job.fields(worker), error=error)})
    return error, True


class Outcomes:
    """What every executor does once a handler is done with a job."""

    def __init__(self, worker: Host):
        self.w = worker
        self.add = worker.reporter.add

    def returned(self, job: Job, result: Any) -> None:
        job.state = RETURNED
        problem, sendable = encode_result(result)
        if problem is not None:
            self.rejected(job, problem)
        elif job.take():
            if job.span is not None:
                tracing.succeeded(job)
            self.add(OK, job, sendable)
        else:
            self.gone(job)  # timed out, lost or handed back meanwhile: discard

    def rejected(self, job: Job, problem: str) -> None:
        error = f"result rejected: {problem}"
        event(logging.WARNING, "result_rejected", error, **job.fields(self.w.name))
        if job.take():
            if job.span is not None:
                tracing.failed(job, error, False)
            self.add(FAIL_RET, job, error, False)
        else:
            self.gone(job)

    def raised(self, job: Job, exc: BaseException, *, owned: bool = False) -> None:
        job.state = RETURNED
        if isinstance(exc, Snooze):
            self.snoozed(job, exc.seconds, owned=owned)
            return
        error, retry = failure_of(job, exc, self.w.name)
        if owned or job.take():
            if job.span is not None:
                tracing.failed(job, error, retry, exc)
            self.add(FAIL_RET, job, error, retry)
        else:
            self.gone(job)

    def failed(self, job: Job, error: str, retryable: bool) -> None:
        """A failure already put in words (e.g. by a handler process)."""
        job.state = RETURNED
        if job.take():
            if job.span is not None:
                tracing.failed(job, error, retryable)
            self.add(FAIL_RET, job, error, retryable)
        else:
            self.gone(job)

    def snoozed(self, job: Job, seconds: float, *, owned: bool = False) -> None:
        """The handler said "not now" (``raise Snooze(seconds)``)."""
        job.state = RETURNED
        if owned or job.take():
            if job.span is not None:
                tracing.snoozed(job, seconds)
            self.add(SNOOZE, job, seconds)
        else:
            self.gone(job)

    def skipped(self, job: Job) -> None:
        """A job that never started: its report (timeout, lost, handed back) is made."""
        job.state = RETURNED
        self.gone(job)

    def gone(self, job: Job) -> None:
        if job.span is not None:
            tracing.dropped(job)
        self.add(GONE, job)

    # -- the sync path --------------------------------------------------------------------
    def run_sync(self, job: Job) -> None:
        if job.taken:
            self.skipped(job)
            return
        job.state = RUNNING
        job.started = time.monotonic()
        task = job.task
        if task.transactional:
            self._run_transactional(job)
            return
        try:
            if job.span is None:
                result = task.handler(job.job_id, job.lease.payload, job.ctx)
            else:
                with tracing.running(job):
                    result = task.handler(job.job_id, job.lease.payload, job.ctx)
        except BaseException as exc:  # noqa: BLE001 - every handler outcome is reported
            self.raised(job, exc)
            return
        self.returned(job, result)

    def _run_transactional(self, job: Job) -> None:
        """``jobs.complete`` on the handler's own transaction: a rejected completion (JB001)
        rolls the handler's writes back with it."""
        w = self.w
        stack = contextlib.ExitStack()

        def tx_factory():
            conn = stack.enter_context(w.db.connection())
            stack.enter_context(conn.transaction())
            return conn

        job.ctx._tx_factory = tx_factory
        owned = False
        try:
            with stack, (tracing.running(job) if job.span is not None else contextlib.nullcontext()):
                result = job.task.handler(job.job_id, job.lease.payload, job.ctx)
                problem, sendable = encode_result(result)
                if problem is not None:
                    raise _Rejected(problem)
                if not job.take():
                    raise _Discard()  # timed out or handed back: leaving rolls back
                owned = True
                outcome = w.db.complete_lease(job.lease, w.name, sendable, conn=job.ctx.tx)
        except _Discard:
            job.state = RETURNED
            self.gone(job)
            return
        except _Rejected as exc:
            job.state = RETURNED
            self.rejected(job, str(exc))
            return
        except LeaseLost as exc:
            job.state = RETURNED
            job.ctx._cancel("lease_lost")
            event(logging.WARNING, "lease_lost",
                  "complete rejected: lease lost (JB001); the handler's writes rolled back",
                  sqlstate="JB001", error=str(exc), **job.fields(w.name))
            if job.span is not None:
                tracing.failed(job, "lease lost (JB001)", True, exc)
            self.add(LOST_RET, job)
            return
        except BaseException as exc:  # noqa: BLE001 - every handler outcome is reported
            # Nothing was committed: the transaction is gone, so a retry is right.
            self.raised(job, exc, owned=owned)
            return
        job.state = RETURNED
        if job.span is not None:
            tracing.succeeded(job)
        # Only now is the completion committed: signals pushed earlier could be popped
        # before the jobs they wake are claimable, and be wasted.
        self.add(DONE, job, outcome)


class _Rejected(Exception):
    pass


class _Discard(Exception):
    """Leaves a transactional block so its writes roll back without a failure report."""


class ThreadExecutor:
    def __init__(self, worker: Host, outcomes: Outcomes, size: int, max_hung: int):
        self.w = worker
        self.outcomes = outcomes
        self.size = size
        self.max_hung = max_hung
        self.q: collections.deque[Job] = collections.deque()
        self._idle: list[threading.Lock] = []
        self._waking = False
        self._mutex = threading.Lock()
        self._stopping = False
        self.live = 0
        self.hung = 0
        self._seq = 0

    def start(self) -> None:
        for _ in range(self.size):
            self._spawn()

    def _spawn(self) -> None:
        with self._mutex:
            self.live += 1
            self._seq += 1
            n = self._seq
        threading.Thread(target=self._loop, name=f"jobfence-handler-{n}", daemon=True).start()

    def submit(self, jobs: list[Job]) -> None:
        self.q.extend(jobs)
        if self._idle and not self._waking:
            self._wake()

    def _wake(self) -> None:
        with self._mutex:
            if self._idle and not self._waking and self.q:
                self._waking = True
                self._idle.pop().release()

    def _take(self, lock: threading.Lock) -> Job | None:
        q = self.q
        while True:
            try:
                job = q.popleft()
            except IndexError:
                with self._mutex:
                    if self._stopping:
                        return None
                    if q:
                        continue
                    self._idle.append(lock)
                lock.acquire()
                self._waking = False
                continue
            if q and self._idle and not self._waking:
                self._wake()
            return job

    def _loop(self) -> None:
        lock = threading.Lock()
        lock.acquire()
        run = self.outcomes.run_sync
        while True:
            job = self._take(lock)
            if job is None:
                return
            run(job)
            if job.hung:
                with self._mutex:
                    self.hung -= 1
                    retire = self.live - self.hung > self.size
                    if retire:
                        self.live -= 1
                event(logging.WARNING, "handler_unhung",
                      "a hung handler returned at last; its result was discarded",
                      hung=self.hung, retired=retire, **job.fields(self.w.name))
                if retire:
                    return

    def note_hung(self, job: Job) -> None:
        """Called by the lease keeper for a job failed at its timeout."""
        with self._mutex:
            if job.state != RUNNING or job.hung:
                return
            job.hung = True
            self.hung += 1
            spawn = self.live - self.hung < self.size and self.hung <= self.max_hung
        event(logging.WARNING, "handler_hung",
              "handler still running past its timeout; its thread is counted as hung"
              + ("; a replacement thread takes its place" if spawn else
                 "; no replacement: the hung-thread limit is reached"),
              hung=self.hung, max_hung=self.max_hung, **job.fields(self.w.name))
        if spawn:
            self._spawn()

    def drain(self) -> list[Job]:
        out = []
        with contextlib.suppress(IndexError):
            while True:
                out.append(self.q.popleft())
        return out

    def stop(self) -> None:
        with self._mutex:
            self._stopping = True
            idle, self._idle = self._idle, []
        for lock in idle:
            lock.release()


class AsyncExecutor:
    """``async def`` handlers, up to ``size`` in flight on one event loop thread."""

    def __init__(self, worker: Host, outcomes: Outcomes, size: int):
        self.w = worker
        self.outcomes = outcomes
        self.size = size
        self.loop = asyncio.new_event_loop()
        self.waiting: collections.deque[Job] = collections.deque()
        self.running = 0
        self._thread = threading.Thread(target=self._serve, name="jobfence-asyncio", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _serve(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def submit(self, jobs: list[Job]) -> None:
        self.loop.call_soon_threadsafe(self._admit, jobs)

    def _admit(self, jobs: list[Job]) -> None:
        self.waiting.extend(jobs)
        self._fill()

    def _fill(self) -> None:
        loop = self.loop
        while self.running < self.size and self.waiting:
            job = self.waiting.popleft()
            if job.taken:
                self.outcomes.skipped(job)
                continue
            self.running += 1
            job.state = RUNNING
            job.started = time.monotonic()
            task = loop.create_task(self._run(job))
            # A cancel request, timeout or lost lease cancels the task at its next await.
            job.ctx._on_cancel = lambda t=task: loop.call_soon_threadsafe(t.cancel)
            if job.ctx.cancelled():
                task.cancel()

    async def _run(self, job: Job) -> None:
        try:
            if job.span is None:
                result = await job.task.handler(job.job_id, job.lease.payload, job.ctx)
            else:
                with tracing.running(job):
                    result = await job.task.handler(job.job_id, job.lease.payload, job.ctx)
        except BaseException as exc:  # noqa: BLE001 - every handler outcome is reported
            self.outcomes.raised(job, exc)
        else:
            self.outcomes.returned(job, result)
        finally:
            self.running -= 1
            self._fill()

    def drain(self) -> list[Job]:
        if not self.loop.is_running():
            return []
        fut = asyncio.run_coroutine_threadsafe(self._drain(), self.loop)
        return fut.result(5)

    async def _drain(self) -> list[Job]:
        out = list(self.waiting)
        self.waiting.clear()
        return out

    def stop(self) -> None:
        if self.loop.is_running():
            self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(2)
