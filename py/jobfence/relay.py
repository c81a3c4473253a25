"""The relay: pushes the ids that SQL producers announce with ``pg_notify('jobs_submitted')``.

Notifications are delivered only on commit (the outbox of DESIGN §6) but only to a
connected listener: whatever was sent while the relay was away is found again by polling
``jobs.stale_queued`` — at every (re)connect, and every ``poll_interval`` while the LISTEN
connection is down — for every queue PostgreSQL names (``jobs.queues``) and those given on
the command line.
"""

from __future__ import annotations

import json
import logging
import threading
from datetime import datetime
from typing import Iterable

import psycopg
import redis

from . import log as jlog
from . import sql
from .db import Database
from .observe import process as metrics
from .transport import Transport, key_text, ready_key
from .worker import Backoff

logger = logging.getLogger("jobfence.relay")


def parse_notification(payload: str) -> list[tuple[int, str, datetime | None]]:
    """``{"id", "queue", "run_after"}`` (one submit) or ``{"queue", "ids", ["run_after"]}``
    (submit_many / fan_out) -> (job_id, queue, run_after) triples."""
    data = json.loads(payload)
    queue = data.get("queue") or "default"
    run_after = data.get("run_after")
    when = None
    if run_after:
        try:
            when = datetime.fromisoformat(run_after)
        except ValueError:
            when = None  # pushed as due: a too-early claim is a no-op, the reaper retries
    ids = data.get("ids")
    if ids is None and data.get("id") is not None:
        ids = [data["id"]]
    return [(int(i), queue, when) for i in ids or ()]


class Relay:
    def __init__(self, database_url: str, redis_url: str, *, poll_interval: float = 5.0,
                 stale_after: float = 5.0, queues: Iterable[str] = ()):
        self.url = database_url
        self.poll_interval = poll_interval
        self.stale_after = stale_after
        # Polled at every catch-up even if PostgreSQL does not name them (yet).
        self.queues: set[str] = set(queues) | {"default"}
        self.db = Database(database_url, max_size=2, name="jobfence-relay")
        self.transport = Transport(redis_url)
        self._stop = threading.Event()
        self.pushed = 0

    def stop(self) -> None:
        self._stop.set()

    def run(self) -> int:
        backoff = Backoff(first=0.2, cap=self.poll_interval)
        while not self._stop.is_set():
            try:
                with psycopg.connect(self.url, autocommit=True,
                                     application_name="jobfence-relay") as conn:
                    conn.execute(sql.LISTEN_SUBMITTED)
                    metrics.POSTGRES.ok()
                    metrics.relay_listening(True)
                    jlog.event(logger, logging.INFO, "relay_listening",
                               "listening on jobs_submitted", queues=sorted(self.queues))
                    backoff.reset()
                    # Anything committed while nobody listened is only in PostgreSQL now,
                    # however recent: a notification sent a moment before LISTEN reached no
                    # one. Pushing every claimable job once is harmless (a duplicate claim is
                    # a no-op); waiting for stale_after would leave them to the reaper.
                    self.catch_up(older_than=0.0)
                    self._listen(conn)
            except psycopg.OperationalError as exc:
                metrics.relay_listening(False)
                if self._stop.is_set():
                    break
                metrics.POSTGRES.failed()
                delay = backoff.next()
                jlog.event(logger, logging.WARNING, "db_unavailable",
                           f"LISTEN connection lost; polling, reconnect in {delay:.1f}s",
                           error=str(exc))
                self._poll_quietly()
                self._stop.wait(delay)
        jlog.event(logger, logging.INFO, "relay_stopped", "relay stopped", pushed=self.pushed)
        self.db.close()
        self.transport.close()
        return 0

    def _listen(self, conn: psycopg.Connection) -> None:
        while not self._stop.is_set():
            batch: list[tuple[int, str, datetime | None]] = []
            for note in self._next_notes(conn):
                try:
                    batch.extend(parse_notification(note.payload))
                except (ValueError, TypeError, KeyError) as exc:
                    jlog.event(logger, logging.WARNING, "bad_notification",
                               "ignored a malformed notification", error=str(exc),
                               payload=note.payload[:200])
            if batch:
                self._push(batch)

    @staticmethod
    def _next_notes(conn: psycopg.Connection, limit: int = 1000) -> list:
        """The next batch of notifications: wait (briefly, so that stop() is noticed) for the
        first, then take whatever else has already arrived without waiting. A quiet relay
        pushes each notification at once; a busy one pushes up to ``limit`` per pipeline.
        (A single ``notifies(timeout=0.5, stop_after=limit)`` would hold a lone notification
        back for the whole half second.)"""
        notes = list(conn.notifies(timeout=0.5, stop_after=1))
        while notes and len(notes) < limit:
            more = list(conn.notifies(timeout=0, stop_after=limit - len(notes)))
            if not more:
                break
            notes.extend(more)
        return notes

    def _push(self, signals: list[tuple[int, str, datetime | None]]) -> None:
        try:
            failed = self.transport.push_each(signals)
        except redis.RedisError as exc:
            metrics.REDIS.failed()
            self._park([i for i, _, _ in signals], exc)
            return
        metrics.REDIS.ok()
        unsent = [t for f in failed for t in f.signals]
        sent = len(signals) - len(unsent)
        self.pushed += sent
        metrics.relay_pushed(sent)
        jlog.event(logger, logging.DEBUG, "relayed", "pushed", count=sent)
        for f in failed:
            # A key of the wrong type refuses only its own queue's ids; the others went
            # through. The reaper deletes such a key and pushes the parked ids again.
            self.transport.warnings.warn("redis_key_skipped", "key refused the push; its "
                                         "ids are parked as enqueue_failed", f.key, f.error,
                                         count=len(f.signals))
        if unsent:
            self._park([i for i, _, _ in unsent], failed[0].error, quiet=True)

    def _park(self, ids: list[int], error: Exception | str, quiet: bool = False) -> None:
        try:
            marked = self.db.mark_enqueue_failed(ids)
        except psycopg.Error as db_exc:
            marked = None  # still queued in PostgreSQL: the reaper's sweep finds them
            jlog.event(logger, logging.WARNING, "db_unavailable", str(db_exc))
        # A corrupt key is warned about (rate-limited) by the caller: a line per
        # notification would flood the log for as long as the key stays.
        jlog.event(logger, logging.INFO if quiet else logging.WARNING, "enqueue_failed",
                   "Redis push failed; jobs parked as enqueue_failed", error=str(error),
                   count=len(ids), marked=marked, job_ids=ids[:20])

    def catch_up(self, older_than: float | None = None) -> int:
        """Push the claimable jobs untouched for ``older_than`` seconds (default: the
        relay's ``stale_after``) of every queue."""
        # Read afresh each time: a queue first used while the relay was away is exactly the
        # one whose notifications it missed.
        queues = sorted(self.queues | set(self.db.queues()))
        age = self.stale_after if older_than is None else older_than
        stale = []
        for queue in queues:
            try:
                found = self.db.stale_queued(queue, age)
            except UnicodeEncodeError as exc:
                # A --queue that is not UTF-8 names no PostgreSQL queue: nothing to push.
                self.transport.warnings.warn(
                    "queue_skipped", "queue name is not valid UTF-8: no job can be in it",
                    ready_key(queue), exc, queue=key_text(queue))
                continue
            stale += [(s.job_id, s.queue, s.run_after) for s in found]
        if stale:
            self._push(stale)
            jlog.event(logger, logging.INFO, "relay_caught_up",
                       "re-pushed claimable jobs that may have missed their signal",
                       count=len(stale), queues=sorted({q for _, q, _ in stale}))
        return len(stale)

    def _poll_quietly(self) -> None:
        try:
            self.catch_up()
        except (psycopg.Error, redis.RedisError) as exc:
            # Both sides may be down; the next poll tries again.
            jlog.event(logger, logging.WARNING, "poll_failed", "catch-up poll failed; retrying",
                       error=str(exc))
