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
import time
from typing import Iterable

import psycopg
import redis

from . import log as jlog
from .db import Database, listen_url
from .errors import JobfenceError
from .observe import process as metrics
from .rows import Signal
from .schedules import Ticker
from .transport import Transport, is_corruption, key_text

logger = logging.getLogger("jobfence.reaper")

PRUNE_EVERY = 60.0


class Reaper:
    def __init__(self, database_url: str, redis_url: str, *, interval: float = 5.0,
                 stale_after: float = 5.0, queues: Iterable[str] = (), batch: int = 1000,
                 dead_letter_webhook: str | None = None, retain: float | None = 7 * 86400.0,
                 schedules: bool = True, listen_database_url: str | None = None,
                 dead_letter_timeout: float = 5.0, dead_letter_retry_base: float = 1.0,
                 dead_letter_retry_max: float = 300.0):
        self.interval = interval
        # Retention: terminal jobs older than this are pruned, a bounded slice at a time;
        # None keeps everything (an operator prunes by hand, `jobfence prune`).
        self.retain = retain
        self._pruned_at = 0.0
        self.stale_after = stale_after
        self.batch = batch
        # Swept at every tick even if PostgreSQL does not name them (yet).
        self.queues: set[str] = set(queues) | {"default"}
        self.db = Database(database_url, max_size=2, name="jobfence-reaper")
        self.transport = Transport(redis_url, namespace=self.db.redis_namespace)
        self._swept: list[str] = []
        self._stop = threading.Event()
        # Periodic jobs: enqueued by whichever reapers run, each tick once (schedules.py).
        self.schedules = Ticker(self.db, interval) if schedules else None
        self.dead_letters = None
        if dead_letter_webhook:
            from .deadletters import DeadLetterForwarder

            # It LISTENs: behind a transaction pooler, on a direct URL of its own.
            self.dead_letters = DeadLetterForwarder(
                listen_url(database_url, listen_database_url, "the dead-letter forwarder"),
                self.db, dead_letter_webhook, timeout=dead_letter_timeout,
                retry_base=dead_letter_retry_base, retry_max=dead_letter_retry_max,
                # Without a NOTIFY (none is kept while nobody listens), pages are looked
                # for at every tick.
                poll=max(interval, 0.1))

    def stop(self) -> None:
        self._stop.set()

    def run(self) -> int:
        # Ready means PostgreSQL answered: until then say why not, once per attempt.
        while not self._stop.is_set():
            cause = self.db.why_unreachable()
            if cause is None:
                break
            metrics.POSTGRES.failed()
            if self.db.permanent(cause):
                jlog.event(logger, logging.ERROR, "db_refused",
                           "PostgreSQL refused the reaper's login for good; not retrying: "
                           + " ".join(str(cause).split()))
                return 6  # docs/cli.md, exit 6
            jlog.event(logger, logging.WARNING, "db_unavailable",
                       f"cannot reach PostgreSQL yet; next try in {self.interval}s",
                       error=" ".join(str(cause).split()))
            self._stop.wait(self.interval)
        if not self._stop.is_set():
            jlog.event(logger, logging.INFO, "reaper_ready", "reaper ready", interval=self.interval,
                       stale_after=self.stale_after, queues=sorted(self.queues))
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
                if max(counts["reaped"], counts["recovered"], counts["pruned"]) >= self.batch:
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
        counts = {"reaped": 0, "recovered": 0, "moved": 0, "stale_repushed": 0, "pruned": 0}
        counts["pruned"] = self._prune()
        # Before the Redis checks: a tick is due whether or not Redis answers.
        if self.schedules:
            self.schedules.tick(self._push)
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
            unsent = self._push(recovered)
            if unsent:
                # Redis went away between the ping and the push, or a key refused them
                # twice: park those again.
                self.db.mark_enqueue_failed([s.job_id for s in unsent])
        else:
            return counts

        for queue in self.sweep_queues():
            # Redis corruption is per key: it skips this queue for this tick, never the
            # others (a lost server still ends the tick, in run()).
            empty = self._redis_side(queue, counts)
            if not empty:
                continue
            try:
                stale = self.db.stale_queued(queue, self.stale_after, self.batch)
            except UnicodeEncodeError as exc:
                # A --queue that is not UTF-8 names no PostgreSQL queue: nothing to re-push.
                self.transport.warnings.warn(
                    "queue_skipped", "queue name is not valid UTF-8: no job can be in it",
                    self.transport.ready_key(queue), exc, queue=key_text(queue))
                continue
            if stale:
                self._push(stale)
                counts["stale_repushed"] += len(stale)
        return counts

    def _prune(self) -> int:
        """Retention, at most once a minute and one bounded slice (``batch`` jobs) per tick
        while a backlog lasts, so no tick holds row locks for long. The history's day
        partitions are kept ahead first, whatever the retention, and dropped once caught up."""
        now = time.monotonic()
        if now - self._pruned_at < PRUNE_EVERY:
            return 0
        self.db.create_event_partitions()
        if self.retain is None:
            self._pruned_at = now
            return 0
        pruned = self.db.prune(self.retain, self.batch)
        if pruned < self.batch:
            self._pruned_at = now   # caught up: look again in a minute
            self.db.drop_event_partitions(self.retain)
        return pruned

    def _redis_side(self, queue: str, counts: dict[str, int]) -> bool:
        """Move the queue's due ids; True if its ready list is empty (worth a stale re-push).
        A key of the wrong type is deleted and the queue tried again; each of the two keys
        can need that once, hence three tries."""
        for _ in range(3):
            try:
                counts["moved"] += self.transport.move_due(queue, self.batch)
                return self.transport.ready_length(queue) == 0
            except redis.ResponseError as exc:
                if not is_corruption(exc):
                    raise
                self._repair(getattr(exc, "key", self.transport.ready_key(queue)), exc)
        return False

    def _repair(self, key: str, exc: Exception) -> None:
        """Delete a jobfence key of the wrong type. jobfence owns the namespace and keeps
        only job ids there, which PostgreSQL can rebuild; such a key holds none of them, and
        left alone it would stop every worker of its queue for good."""
        held = self.transport.drop_wrong_type(key)
        if held:
            self.transport.warnings.warn(
                "redis_key_repaired", f"deleted a key holding a {held} where jobfence keeps "
                "a list or zset; the stale re-push signals its queue's jobs from PostgreSQL",
                key, exc, type=held)

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

    def _push(self, signals: list[Signal]) -> list[Signal]:
        """Push; returns the signals not pushed (all of them if Redis is away). A key of the
        wrong type is repaired and its signals pushed again once."""
        if not signals:
            return []
        todo = [s.push_tuple() for s in signals]
        try:
            for again in (True, False):
                failed = self.transport.push_each(todo)
                if not failed:
                    return []
                todo = [t for f in failed for t in f.signals]
                if again:
                    for f in failed:
                        self._repair(f.key, f.error)
            for f in failed:
                self.transport.warnings.warn("push_failed", "key refused the push; retried "
                                             "next tick", f.key, f.error, count=len(f.signals))
        except redis.RedisError as exc:
            jlog.event(logger, logging.WARNING, "push_failed", "push failed; retried later",
                       error=str(exc), count=len(todo))
        unsent = {t[0] for t in todo}
        return [s for s in signals if s.job_id in unsent]
