"""The reaper: repairs what crashes and lost signals leave behind, every ``interval``.

One tick: ``jobs.compact_metrics`` (fold the metrics rollup's closed minutes), ``jobs.reap``
(expired leases -> queued or failed, then push), ``jobs.recover_enqueue_failed`` (push
again), move due ids from the delayed sets to the ready lists, and for every ready list that
is empty re-push the claimable jobs PostgreSQL still holds (``jobs.stale_queued``). Every step is idempotent and every push of a duplicate is a no-op
at claim time, so several reapers may run at once.

The queues swept are read from PostgreSQL at every tick (``jobs.queues``: the queues of the
declared kinds and of every queued job), plus those given on the command line. Never from
Redis: a job whose signal was lost has, by definition, left no trace there.
"""

from __future__ import annotations

import logging
import threading
from typing import Iterable

import psycopg
import redis

from . import log as jlog
from .db import Database
from .errors import JobfenceError
from .observe import process as metrics
from .rows import Signal
from .transport import Transport

logger = logging.getLogger("jobfence.reaper")


class Reaper:
    def __init__(self, database_url: str, redis_url: str, *, interval: float = 5.0,
                 stale_after: float = 5.0, queues: Iterable[str] = (), batch: int = 1000,
                 dead_letter_webhook: str | None = None):
        self.interval = interval
        self.stale_after = stale_after
        self.batch = batch
        # Swept at every tick even if PostgreSQL does not name them (yet).
        self.queues: set[str] = set(queues) | {"default"}
        self.db = Database(database_url, max_size=2, name="jobfence-reaper")
        self.transport = Transport(redis_url)
        self._swept: list[str] = []
        self._stop = threading.Event()
        self.dead_letters = None
        if dead_letter_webhook:
            from .deadletters import DeadLetterForwarder

            self.dead_letters = DeadLetterForwarder(database_url, self.db, dead_letter_webhook)

    def stop(self) -> None:
        self._stop.set()

    def run(self) -> int:
        jlog.event(logger, logging.INFO, "reaper_ready", "reaper ready",
                   interval=self.interval, stale_after=self.stale_after, queues=sorted(self.queues))
        if self.dead_letters:
            self.dead_letters.start()
        while not self._stop.is_set():
            try:
                counts = self.tick()
                metrics.POSTGRES.ok()
                metrics.reaper_ticked(counts)
                if any(counts.values()):
                    jlog.event(logger, logging.INFO, "reaper_tick", "repaired", **counts)
                # A full batch means more is waiting: go again without sleeping.
                if counts["reaped"] >= self.batch or counts["recovered"] >= self.batch:
                    continue
            except psycopg.OperationalError as exc:
                metrics.POSTGRES.failed()
                metrics.reaper_tick_failed("db_unavailable")
                jlog.event(logger, logging.WARNING, "db_unavailable",
                           f"tick skipped; next try in {self.interval}s", error=str(exc))
            except redis.RedisError as exc:
                metrics.REDIS.failed()
                metrics.reaper_tick_failed("redis_unavailable")
                jlog.event(logger, logging.WARNING, "redis_unavailable",
                           f"tick cut short; next try in {self.interval}s", error=str(exc))
            except JobfenceError as exc:
                metrics.reaper_tick_failed("tick_failed")
                jlog.event(logger, logging.ERROR, "tick_failed", str(exc), sqlstate=exc.sqlstate)
            except psycopg.Error as exc:
                # An unexpected server error in one sweep must not stop the repairs: Postgres
                # still holds every job, and the next tick tries again.
                metrics.reaper_tick_failed("tick_failed")
                jlog.event(logger, logging.ERROR, "tick_failed", str(exc), sqlstate=exc.sqlstate)
            self._stop.wait(self.interval)
        jlog.event(logger, logging.INFO, "reaper_stopped", "reaper stopped")
        if self.dead_letters:
            self.dead_letters.stop()
        self.db.close()
        self.transport.close()
        return 0

    def tick(self) -> dict[str, int]:
        counts = {"reaped": 0, "recovered": 0, "moved": 0, "stale_repushed": 0}
        # Upkeep of the metrics rollup, not a repair: not counted, never worth a log line.
        # A few rows per kind and minute in steady state; after a long outage the backlog is
        # folded a bounded slice per tick, so the repairs below are never held up for long.
        self.db.compact_metrics(1000)
        reaped = self.db.reap(self.batch)
        counts["reaped"] = len(reaped)
        # Per job at DEBUG: jobs.event already records every reap; the tick line counts them.
        for s in reaped:
            jlog.event(logger, logging.DEBUG, "reaped", "lease expired: job requeued or failed",
                       job_id=s.job_id, queue=s.queue)
        # Reaped jobs are queued in PostgreSQL already: if this push is lost, the stale
        # sweep below (or the next tick's) signals them.
        self._push(reaped)

        redis_up = self._redis_up()
        metrics.REDIS.ok() if redis_up else metrics.REDIS.failed()
        if redis_up:
            recovered = self.db.recover_enqueue_failed(self.batch)
            counts["recovered"] = len(recovered)
            if recovered and not self._push(recovered):
                # Redis went away between the ping and the push: park them again.
                self.db.mark_enqueue_failed([s.job_id for s in recovered])
        else:
            return counts

        for queue in self.sweep_queues():
            counts["moved"] += self.transport.move_due(queue, self.batch)
            if self.transport.ready_length(queue) == 0:
                stale = self.db.stale_queued(queue, self.stale_after, self.batch)
                if stale:
                    self._push(stale)
                    counts["stale_repushed"] += len(stale)
        return counts

    def sweep_queues(self) -> list[str]:
        """The command-line queues and those PostgreSQL names now, read afresh each tick so
        that a kind declared (or a job submitted) after start-up is swept without a restart."""
        queues = sorted(self.queues | set(self.db.queues()))
        if queues != self._swept:
            # Once per change, so an operator can see a new queue being looked after.
            jlog.event(logger, logging.INFO, "reaper_queues", "sweeping queues", queues=queues)
            self._swept = queues
        return queues

    def _redis_up(self) -> bool:
        try:
            return self.transport.ping()
        except redis.RedisError:
            return False

    def _push(self, signals: list[Signal]) -> bool:
        if not signals:
            return True
        try:
            self.transport.push((s.job_id, s.queue, s.run_after) for s in signals)
            return True
        except redis.RedisError as exc:
            jlog.event(logger, logging.WARNING, "push_failed", "push failed; retried later",
                       error=str(exc), count=len(signals))
            return False
