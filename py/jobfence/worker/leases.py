"""Keeping every held lease alive — claimed-but-waiting jobs as well as running ones.

One thread, one ``jobs.heartbeat_many`` statement per tick for every lease that is due, on a
pool of its own whose statements have a timeout: the keeper never waits behind a row lock,
a slow completion or a retrying report. A lease is refreshed every third of what it had
left when it was granted (or last refreshed) — the lease the job holds, not the kind's
current definition. The keeper also notices cancel requests, timeouts and lost leases, and
writes the periodic stats line.
"""

from __future__ import annotations

import logging
import threading
import time

import psycopg

from .. import tracing
from ..errors import JobfenceError
from .common import RUNNING, Host, Job, describe, event, sqlstate
from .reporter import FAIL, LOST


TICK_SECONDS = 0.05
# A row locked elsewhere (held = NULL) was not checked: ask again soon, not a lease later.
LOCKED_RETRY_SECONDS = 0.2


class LeaseKeeper:
    def __init__(self, worker: Host, db, *, stats_every: float):
        self.w = worker
        self.db = db
        self.stats_every = stats_every
        # Lost leases are counted by the reporter, which hears of every one of them.
        self.stats = {"beats": 0, "beat_failures": 0, "timeouts": 0}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="jobfence-leases", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)

    def _run(self) -> None:
        next_stats = time.monotonic() + self.stats_every
        while not self._stop.wait(TICK_SECONDS):
            try:
                self.tick()
                now = time.monotonic()
                if now >= next_stats:
                    next_stats = now + self.stats_every
                    self.w.log_stats()
            except Exception:  # noqa: BLE001 - a dead keeper would let every lease expire
                logging.getLogger("jobfence.worker").error(
                    "unexpected error in the lease keeper; continuing", exc_info=True,
                    extra={"event": "lease_keeper_error", "fields": {"worker": self.w.name}})

    def tick(self) -> None:
        now = time.monotonic()
        due: list[Job] = []
        soon: list[Job] = []
        for job in list(self.w.held.values()):
            if job.finished:
                continue
            if now >= job.deadline and not job.taken:
                self.timeout(job)
            elif now >= job.next_beat:
                due.append(job)
            elif now >= job.next_beat - job.beat_every / 2:
                soon.append(job)
        if due:
            # Leases granted together come due together; refreshing the nearly-due ones in
            # the same statement saves a round trip on the next ticks.
            self.beat(due + soon)

    def beat(self, jobs: list[Job]) -> None:
        w = self.w
        try:
            beats = self.db.beat_leases([j.lease for j in jobs], w.name)
        except (psycopg.Error, JobfenceError) as exc:
            self.stats["beat_failures"] += 1
            retry = time.monotonic()
            for job in jobs:
                job.next_beat = retry + min(0.5, job.beat_every / 2)
            event(logging.WARNING, "heartbeat_failed",
                  f"heartbeat of {len(jobs)} lease(s) failed: {describe(exc)}; retrying soon",
                  sqlstate=sqlstate(exc), worker=w.name, job_ids=[j.job_id for j in jobs][:20])
            return
        self.stats["beats"] += 1
        by_id = {b.job_id: b for b in beats}
        now, wall = time.monotonic(), time.time()
        for job in jobs:
            if job.finished:
                continue  # completed while the statement ran: its lease is gone on purpose
            beat = by_id.get(job.job_id)
            if beat is None or beat.held is None:
                job.next_beat = now + min(LOCKED_RETRY_SECONDS, job.beat_every)
                continue
            if beat.held is False:
                self.lost(job)
                continue
            if beat.lease_expires_at is not None:
                job.beat_every = max(0.1, (beat.lease_expires_at.timestamp() - wall) / 3)
            job.next_beat = now + job.beat_every
            if beat.cancel_requested and not job.ctx.cancelled():
                event(logging.INFO, "cancel_requested", "cancel requested: telling the handler",
                      **job.fields(w.name))
                job.ctx._cancel("cancel_requested")
            if beat.alive is False and not job.taken:
                self.timeout(job)

    def timeout(self, job: Job) -> None:
        if not job.take():
            return  # its outcome is already on its way
        self.stats["timeouts"] += 1
        event(logging.WARNING, "timeout", "job passed its timeout; failing it",
              **job.fields(self.w.name))
        # The span ends with the report: a handler that never returns would keep it open.
        if job.span is not None:
            tracing.failed(job, "timeout", True)
        self.w.reporter.add(FAIL, job, "timeout", True)
        job.ctx._cancel("timeout")
        self.w.timed_out(job)

    def lost(self, job: Job) -> None:
        job.ctx._cancel("lease_lost")
        job.next_beat = float("inf")  # nothing left to keep alive
        if job.taken:
            # An outcome is already on its way; PostgreSQL will refuse it and the reporter
            # says so.
            return
        event(logging.WARNING, "heartbeat_lost", "heartbeat rejected: lease lost",
              sqlstate="JB001", **job.fields(self.w.name))
        if job.state == RUNNING:
            # The handler reports when it returns (a transactional one rolls back at
            # jobs.complete); PostgreSQL refuses that report. Past its deadline the lease
            # keeper gives up on it like on any other job.
            return
        if job.take():
            if job.span is not None:
                tracing.dropped(job)
            self.w.reporter.add(LOST, job)
