"""Reporting outcomes in batches: successes into ``jobs.complete_many``, failures into
``jobs.fail_many`` — one round trip per flush — and snoozes into ``jobs.snooze_many``, then
the retry, snooze and wake-up signals in one Redis pipeline.

Handlers append to a deque (thread-safe, no lock); this room's thread flushes when it holds
``flush_size`` items or ``linger`` seconds after the first one arrived.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from typing import Any

import psycopg
import redis

from .. import rows
from ..errors import JobfenceError
from ..observe import process as metrics
from ..retry import Backoff
from .common import (OUTCOME_RETRY_SECONDS, Host, Job, describe, event, logger,
                     sqlstate)
from .leasedb import COMPLETED


# Item kinds. Those up to LOST_RET mean "the handler side is done with this job" and free a
# place in the claim budget; FAIL and LOST come from the lease keeper or the shutdown path.
OK, DONE, FAIL_RET, GONE, SNOOZE, LOST_RET, FAIL, LOST = range(8)
_RETURNED = LOST_RET


class _Abandoned(Exception):
    """PostgreSQL stayed away past OUTCOME_RETRY_SECONDS: the reaper recovers the jobs."""


class Reporter:
    def __init__(self, worker: Host, *, flush_size: int, linger: float):
        self.w = worker
        self.db = worker.db
        self.flush_size = max(1, flush_size)
        self.linger = linger
        self.q: collections.deque = collections.deque()
        self.wake = threading.Event()
        # Jobs whose handler has let go (the claim budget counts the rest as in flight).
        # Counted as each one returns, not when its report is flushed: otherwise the jobs
        # waiting out the linger and the round trip hold places in the budget, and the
        # claimer, finding a sliver of room, claims a fraction of a batch at a time.
        self.returned = 0
        self._returned_lock = threading.Lock()
        self.stats = {"completed": 0, "retried": 0, "snoozed": 0, "failed": 0, "lost": 0}
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="jobfence-reporter", daemon=True)

    # -- called from any thread -----------------------------------------------------------
    def add(self, op: int, job: Job, a: Any = None, b: Any = None) -> None:
        if op <= _RETURNED:
            if job.started:
                # Timed here, in the handler's thread as it lets go of the job, so the
                # figure is the handler's own and not the report's linger or round trip.
                metrics.job_ran(job.lease.kind, time.monotonic() - job.started)
            with self._returned_lock:  # handlers of several threads return at once
                self.returned += 1
        q = self.q
        q.append((op, job, a, b))
        n = len(q)
        if (n == 1 or n >= self.flush_size) and not self.wake.is_set():
            self.wake.set()

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float) -> bool:
        """Flush what is left and end; False when the flush did not finish in time."""
        self._stopping = True
        self.wake.set()
        self._thread.join(timeout)
        return not self._thread.is_alive()

    # -- the reporter thread --------------------------------------------------------------
    def _run(self) -> None:
        while True:
            if not self.q:
                if self._stopping:
                    return
                self.wake.wait(0.2)
                self.wake.clear()
                continue
            if len(self.q) < self.flush_size and self.linger > 0 and not self._stopping:
                # Give the rest of a batch a moment to arrive: one round trip for all of it.
                self.wake.clear()
                if len(self.q) < self.flush_size:
                    self.wake.wait(self.linger)
            try:
                self._flush()
            except Exception:  # noqa: BLE001 - a dead reporter would fail every later job
                logger.error("unexpected error while reporting outcomes; the affected jobs "
                             "are recovered by the reaper once their leases expire",
                             exc_info=True, extra={"event": "reporter_error",
                                                   "fields": {"worker": self.w.name}})

    def _flush(self) -> None:
        pop = self.q.popleft
        oks: list[tuple[Job, Any]] = []
        fails: list[tuple[Job, str, bool]] = []
        snoozes: list[tuple[Job, float]] = []
        finished: list[tuple[Job, rows.Outcome | None, str | None]] = []
        lost_jobs: list[Job] = []
        freed = False
        for _ in range(max(1000, self.flush_size * 2)):
            try:
                op, job, a, b = pop()
            except IndexError:
                break
            freed = freed or op <= _RETURNED
            if op == OK:
                oks.append((job, a))
            elif op == FAIL_RET or op == FAIL:
                fails.append((job, a, b))
            elif op == DONE:
                finished.append((job, a, None))
            elif op == SNOOZE:
                snoozes.append((job, a))
            elif op == LOST_RET or op == LOST:
                lost_jobs.append(job)
        if freed:
            # Once per flush, not once per job: the claimer wakes to a batch's worth of room.
            self.w.claimer.freed.set()
        for job in lost_jobs:
            self.stats["lost"] += 1
            self.w.forget(job)
        if not oks and not fails and not finished and not snoozes:
            return
        try:
            done_oks, done_fails = self._send(oks, fails)
        except _Abandoned:
            for job, *_ in oks + fails + snoozes:
                self.w.forget(job)
            return
        finished.extend(done_oks)
        finished.extend(done_fails)
        snoozed: set[int] = set()
        if snoozes:
            finished.extend(self._snooze(snoozes))
            snoozed = {job.job_id for job, _ in snoozes}
        self._settle(finished, snoozed)

    # -- PostgreSQL -----------------------------------------------------------------------
    def _send(self, oks, fails):
        """(job, outcome, error) for every item, outcome None where PostgreSQL refused it."""
        out_ok, out_fail = [], []
        if oks and fails:
            try:
                ok_rows, fail_rows = self._retrying(lambda: self._pipelined(oks, fails),
                                                    "complete_many+fail_many")
                return (self._pair_ok(oks, ok_rows), self._pair_fail(fails, fail_rows))
            except (psycopg.Error, JobfenceError) as exc:
                # One statement of the pipeline refused (the other was aborted with it):
                # send them apart, which isolates the culprit.
                event(logging.ERROR, "report_failed",
                      f"batched report failed: {describe(exc)}; reporting apart",
                      sqlstate=sqlstate(exc), worker=self.w.name)
        if oks:
            out_ok, rejected = self._complete(oks)
            fails = list(fails) + rejected
        if fails:
            out_fail = self._fail(fails)
        return out_ok, out_fail

    def _pipelined(self, oks, fails):
        return self.db.finish_leases([(j.lease, r) for j, r in oks],
                                     [(j.lease, e, r) for j, e, r in fails],
                                     self.w.name)

    def _complete(self, oks):
        """complete_many; when the server refuses the batch (a result jsonb cannot hold),
        one by one, so the poison result fails its own job and nothing else."""
        name = self.w.name
        try:
            got = self._retrying(lambda: self.db.complete_leases(
                [(j.lease, r) for j, r in oks], name), "complete_many")
            return self._pair_ok(oks, got), []
        except (psycopg.Error, JobfenceError) as exc:
            event(logging.ERROR, "complete_failed",
                  f"complete_many refused {len(oks)} result(s): {describe(exc)}; completing "
                  "them one by one", sqlstate=sqlstate(exc), worker=name,
                  job_ids=[j.job_id for j, _ in oks][:50])
        done, rejected = [], []
        for job, result in oks:
            try:
                got = self._retrying(lambda: self.db.complete_leases(
                    [(job.lease, result)], name), "complete_many")
                done += self._pair_ok([(job, result)], got)
            except _Abandoned:
                raise
            except (psycopg.Error, JobfenceError) as exc:
                error = f"result rejected by PostgreSQL: {describe(exc)}"[:2000]
                event(logging.WARNING, "result_rejected", error, sqlstate=sqlstate(exc),
                      **job.fields(name))
                rejected.append((job, error, False))
        return done, rejected

    def _fail(self, fails):
        name = self.w.name
        items = [(j.lease, e, r) for j, e, r in fails]
        try:
            return self._pair_fail(fails, self._retrying(
                lambda: self.db.fail_leases(items, name), "fail_many"))
        except (psycopg.Error, JobfenceError) as exc:
            event(logging.ERROR, "fail_failed", f"fail_many refused {len(items)} item(s): "
                  f"{describe(exc)}; failing them one by one", sqlstate=sqlstate(exc),
                  worker=name)
        out = []
        for (job, error, retry), item in zip(fails, items):
            try:
                out += self._pair_fail([(job, error, retry)], self._retrying(
                    lambda: self.db.fail_leases([item], name), "fail_many"))
            except _Abandoned:
                raise
            except (psycopg.Error, JobfenceError) as exc:
                event(logging.ERROR, "report_dropped",
                      f"could not report the job's failure ({describe(exc)}); the reaper "
                      "recovers it when its lease expires", sqlstate=sqlstate(exc),
                      **job.fields(name))
                self.w.forget(job)
        return out

    def _snooze(self, snoozes):
        """snooze_many, rare enough to be its own statement; (job, outcome, note) each."""
        name = self.w.name
        try:
            got = self._retrying(lambda: self.db.snooze_leases(
                [(j.lease, delay) for j, delay in snoozes], name), "snooze_many")
        except _Abandoned:
            for job, _ in snoozes:
                self.w.forget(job)
            return []
        except (psycopg.Error, JobfenceError) as exc:
            event(logging.ERROR, "report_dropped",
                  f"could not report {len(snoozes)} snooze(s) ({describe(exc)}); the reaper "
                  "recovers the jobs when their leases expire", sqlstate=sqlstate(exc),
                  worker=name, job_ids=[j.job_id for j, _ in snoozes][:50])
            for job, _ in snoozes:
                self.w.forget(job)
            return []
        by_id = {o.job_id: o for o in got}
        return [(job, by_id.get(job.job_id), f"snoozed for {delay:g}s") for job, delay in snoozes]

    @staticmethod
    def _pair_ok(oks, unusual):
        """``unusual``: complete_leases' answer, the outcomes other than COMPLETED by item."""
        return [(job, unusual.get(i, COMPLETED), None) for i, (job, _) in enumerate(oks)]

    @staticmethod
    def _pair_fail(fails, got):
        by_id = {o.job_id: o for o in got}
        return [(job, by_id.get(job.job_id), error) for job, error, _ in fails]

    def _retrying(self, call, what: str):
        """Retry through connection failures; other errors propagate to the caller."""
        backoff = Backoff()
        deadline = time.monotonic() + OUTCOME_RETRY_SECONDS
        while True:
            try:
                result = call()
                metrics.POSTGRES.ok()
                return result
            except psycopg.OperationalError as exc:
                metrics.POSTGRES.failed()
                if time.monotonic() >= deadline or self.w.out_of_time():
                    event(logging.ERROR, "db_unavailable",
                          f"{what} abandoned; the reaper will recover the job(s)",
                          error=str(exc), worker=self.w.name)
                    raise _Abandoned() from exc
                delay = backoff.next()
                event(logging.WARNING, "db_unavailable",
                      f"{what} failed; retrying in {delay:.1f}s", error=str(exc),
                      worker=self.w.name)
                time.sleep(delay)

    # -- after PostgreSQL decided ---------------------------------------------------------
    def _settle(self, finished, snoozed: set[int] = frozenset()) -> None:
        name = self.w.name
        debug = logger.isEnabledFor(logging.DEBUG)
        stats = self.stats
        signals: list[tuple[int, str, Any]] = []
        woken: list[int] = []
        lost_before = stats["lost"]
        for job, outcome, error in finished:
            if outcome is None or not outcome.accepted:
                stats["lost"] += 1
                job.ctx._cancel("lease_lost")
                event(logging.WARNING, "lease_lost",
                      "outcome rejected: lease lost (JB001); the result is discarded",
                      sqlstate="JB001", error=error, **job.fields(name))
            else:
                status = outcome.status
                if status == "done":
                    stats["completed"] += 1
                    if debug:
                        event(logging.DEBUG, "completed", "job done", wake=outcome.wake or None,
                              duration_ms=_ms(job), **job.fields(name))
                elif status == "queued" and job.job_id in snoozed:
                    stats["snoozed"] += 1
                    signals.append((job.job_id, job.lease.queue, outcome.run_after))
                    if debug:
                        event(logging.DEBUG, "snoozed", "job snoozed", run_after=outcome.run_after,
                              **job.fields(name))
                elif status == "queued":
                    stats["retried"] += 1
                    signals.append((job.job_id, job.lease.queue, outcome.run_after))
                    if debug:
                        event(logging.DEBUG, "retry_scheduled", "job failed, retry scheduled",
                              error=error, run_after=outcome.run_after, **job.fields(name))
                else:
                    stats["failed"] += 1
                    event(logging.WARNING, "failed", f"job {status}", error=error,
                          status=status, **job.fields(name))
                if outcome.wake:
                    woken.extend(outcome.wake)
            self.w.forget(job)
        if stats["lost"] > lost_before:
            metrics.REPORTS_REJECTED.inc(stats["lost"] - lost_before)
        if woken:
            try:
                signals.extend(self.db.push_signals(woken))
            except (psycopg.Error, JobfenceError) as exc:
                event(logging.WARNING, "wake_lookup_failed",
                      "could not look up woken jobs; the reaper's sweep signals them later",
                      woken=woken[:50], error=str(exc), worker=name)
        if signals:
            try:
                self.w.transport.push(signals)
                metrics.REDIS.ok()
            except redis.RedisError as exc:
                metrics.REDIS.failed()
                event(logging.WARNING, "push_failed",
                      "could not signal follow-up jobs; the reaper re-pushes them",
                      error=str(exc), job_ids=[s[0] for s in signals][:50], worker=name)


def _ms(job: Job) -> float | None:
    return round((time.monotonic() - job.started) * 1000, 1) if job.started else None
