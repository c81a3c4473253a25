"""Dead letters page someone: forward ``jobs_dead_lettered`` to a webhook.

A job that exhausts its retries (or fails for good) issues ``pg_notify('jobs_dead_lettered',
'{"ids": [...]}')`` in the transaction that fails it (docs/observability.md). The reaper, when
given ``--dead-letter-webhook URL``, runs one of these beside its sweep: a thread that
LISTENs on its own connection and a thread that POSTs, joined by a bounded queue, so a slow
or broken webhook never delays a reap.

What is posted comes from ``jobs.dead_letters(ids)``, not from the message: a message any
role could have sent only names ids, and only real dead letters are described. A delivery
is retried with backoff; after ``attempts`` failures it is dropped with an ERROR line (the
``JobfenceDeadLetters`` alert, fed by ``jobs.metrics``, still fires: the webhook is the
fast page, not the only one). Notifications sent while no forwarder listens are not
replayed — PostgreSQL does not keep them.
"""

from __future__ import annotations

import json
import logging
import queue
import threading
import urllib.error
import urllib.request
from datetime import datetime
from typing import Any

import psycopg

from . import log as jlog
from . import sql
from .db import Database
from .observe import process as metrics

logger = logging.getLogger("jobfence.deadletters")

CHANNEL = "jobs_dead_lettered"


def parse_message(payload: str) -> list[int]:
    """The job ids of a ``jobs_dead_lettered`` payload; [] for anything else."""
    try:
        ids = json.loads(payload).get("ids")
    except (ValueError, AttributeError):
        return []
    if not isinstance(ids, list):
        return []
    return [i for i in ids if isinstance(i, int) and not isinstance(i, bool) and 0 < i < 2 ** 63]


def _jsonable(row: dict[str, Any]) -> dict[str, Any]:
    return {k: (v.isoformat() if isinstance(v, datetime) else v) for k, v in row.items()}


class DeadLetterForwarder:
    def __init__(self, database_url: str, db: Database, webhook: str, *, attempts: int = 5,
                 backoff: float = 1.0, timeout: float = 5.0, capacity: int = 10_000):
        self.database_url = database_url
        self.db = db
        self.webhook = webhook
        self.attempts = attempts
        self.backoff = backoff
        self.timeout = timeout
        self.pending: queue.Queue[list[int]] = queue.Queue(maxsize=capacity)
        self.forwarded = 0
        self.dropped = 0
        self.listening = threading.Event()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._listen, name="deadletters-listen", daemon=True),
                         threading.Thread(target=self._deliver, name="deadletters-post", daemon=True)]

    def start(self) -> None:
        for t in self._threads:
            t.start()

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(self.timeout + 2)

    # -- listening ----------------------------------------------------------------------
    def _listen(self) -> None:
        delay = self.backoff
        while not self._stop.is_set():
            try:
                with psycopg.connect(self.database_url, autocommit=True, connect_timeout=5) as conn:
                    conn.execute(sql.LISTEN_DEAD_LETTERED)
                    self.listening.set()
                    jlog.event(logger, logging.INFO, "dead_letters_listening",
                               "forwarding dead letters", webhook=self.webhook)
                    delay = self.backoff
                    while not self._stop.is_set():
                        for note in conn.notifies(timeout=0.5):
                            self._enqueue(parse_message(note.payload))
            except psycopg.Error as exc:
                self.listening.clear()
                jlog.event(logger, logging.WARNING, "dead_letters_unavailable",
                           f"LISTEN lost; again in {delay:.0f}s", error=str(exc))
                self._stop.wait(delay)
                delay = min(delay * 2, 30.0)
        self.listening.clear()

    def _enqueue(self, ids: list[int]) -> None:
        if not ids:
            return
        try:
            self.pending.put_nowait(ids)
        except queue.Full:
            self.dropped += len(ids)
            metrics.dead_letters("dropped", len(ids))
            jlog.event(logger, logging.ERROR, "dead_letters_dropped",
                       "webhook backlog full: dead letters not forwarded", count=len(ids))

    # -- delivering ---------------------------------------------------------------------
    def _deliver(self) -> None:
        while not self._stop.is_set():
            try:
                ids = self.pending.get(timeout=0.5)
            except queue.Empty:
                continue
            try:
                jobs = [_jsonable(r) for r in self.db.dead_letters(ids)]
            except psycopg.Error as exc:
                jlog.event(logger, logging.WARNING, "dead_letters_unavailable",
                           "could not read dead letters; retried", error=str(exc))
                self._stop.wait(self.backoff)
                self._enqueue(ids)
                continue
            if jobs:
                self._post(jobs)

    def _post(self, jobs: list[dict[str, Any]]) -> None:
        body = json.dumps({"event": "dead_lettered", "count": len(jobs), "jobs": jobs}).encode()
        delay = self.backoff
        for attempt in range(1, self.attempts + 1):
            request = urllib.request.Request(
                self.webhook, data=body, method="POST",
                headers={"Content-Type": "application/json", "User-Agent": "jobfence"})
            try:
                with urllib.request.urlopen(request, timeout=self.timeout) as reply:
                    reply.read()
                self.forwarded += len(jobs)
                metrics.dead_letters("forwarded", len(jobs))
                jlog.event(logger, logging.INFO, "dead_letters_forwarded", "dead letters posted",
                           count=len(jobs), job_ids=[j["id"] for j in jobs])
                return
            except (urllib.error.URLError, OSError) as exc:
                jlog.event(logger, logging.WARNING, "dead_letters_post_failed",
                           f"webhook failed (attempt {attempt} of {self.attempts})",
                           error=str(exc), count=len(jobs))
                if attempt < self.attempts and self._stop.wait(delay):
                    break
                delay = min(delay * 2, 60.0)
        self.dropped += len(jobs)
        metrics.dead_letters("dropped", len(jobs))
        jlog.event(logger, logging.ERROR, "dead_letters_dropped",
                   "webhook kept failing: dead letters not forwarded",
                   count=len(jobs), job_ids=[j["id"] for j in jobs])
