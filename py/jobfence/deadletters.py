"""Dead letters page someone: forward ``jobs_dead_lettered`` to a webhook.

A job that exhausts its retries (or fails for good) issues ``pg_notify('jobs_dead_lettered',
'{"ids": [...]}')`` in the transaction that fails it (docs/observability.md). The reaper, when
given ``--dead-letter-webhook URL``, runs one of these beside its sweep: a thread that
LISTENs on its own connection and a thread that POSTs, joined by a bounded queue, so a slow
or broken webhook never delays a reap.

What is posted comes from ``jobs.dead_letters(ids)``, not from the message: a message any
role could have sent only names ids, and only real dead letters, failed within the last
``fresh_for`` seconds and not posted already by this forwarder, are described — so a forged
message can neither invent a page nor repeat an old one. Only a 2xx answer is a delivery (a
redirect is not followed: it would turn the POST into a GET without the page). A delivery
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
import urllib.request
from collections import OrderedDict
from datetime import datetime, timedelta, timezone
from typing import Any

import psycopg

from . import log as jlog
from . import sql
from .db import Database
from .observe import process as metrics

logger = logging.getLogger("jobfence.deadletters")

CHANNEL = "jobs_dead_lettered"


# jobs.tally sends at most a few hundred ids per message; anyone with CONNECT may NOTIFY the
# channel, so anything longer is not ours (docs/security.md).
MAX_MESSAGE_CHARS = 8000


def parse_message(payload: str) -> list[int]:
    """The job ids of a ``jobs_dead_lettered`` payload; [] for anything else. Never raises:
    a forged message must not stop the listener."""
    if len(payload) > MAX_MESSAGE_CHARS:
        return []
    try:
        ids = json.loads(payload).get("ids")
    except (ValueError, AttributeError, RecursionError):
        return []
    if not isinstance(ids, list):
        return []
    return [i for i in ids if isinstance(i, int) and not isinstance(i, bool) and 0 < i < 2 ** 63]


def _jsonable(row: dict[str, Any]) -> dict[str, Any]:
    return {k: (v.isoformat() if isinstance(v, datetime) else v) for k, v in row.items()}


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None  # urllib then raises HTTPError for the 3xx: a failed delivery


_OPENER = urllib.request.build_opener(_NoRedirect)


class DeadLetterForwarder:
    def __init__(self, database_url: str, db: Database, webhook: str, *, attempts: int = 5,
                 backoff: float = 1.0, timeout: float = 5.0, capacity: int = 10_000,
                 fresh_for: float = 600.0, remembered: int = 100_000):
        self.database_url = database_url
        self.db = db
        self.webhook = webhook
        self.attempts = attempts
        self.backoff = backoff
        self.timeout = timeout
        self.pending: queue.Queue[list[int]] = queue.Queue(maxsize=capacity)
        self.forwarded = 0
        self.dropped = 0
        self.fresh_for = fresh_for
        self.remembered = remembered
        self._posted: OrderedDict[int, None] = OrderedDict()
        # A full backlog (a flood of forged messages: anyone with CONNECT may NOTIFY) is one
        # ERROR line a minute with how many ids it dropped, not a line per message.
        self._full_throttle = jlog.Throttle(60.0)
        self._full_dropped = 0
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
            self._full_dropped += len(ids)  # the listener thread's own counter
            if self._full_throttle.allow() is None:
                return
            count, self._full_dropped = self._full_dropped, 0
            jlog.event(logger, logging.ERROR, "dead_letters_dropped",
                       "webhook backlog full: dead letters not forwarded (count: since the "
                       "last line)", count=count)

    # -- delivering ---------------------------------------------------------------------
    def _deliver(self) -> None:
        while not self._stop.is_set():
            try:
                ids = self.pending.get(timeout=0.5)
            except queue.Empty:
                continue
            try:
                self._deliver_one(ids)
            except Exception as exc:  # noqa: BLE001 - the thread must outlive any one page
                self.dropped += len(ids)
                metrics.dead_letters("dropped", len(ids))
                jlog.event(logger, logging.ERROR, "dead_letters_dropped",
                           "dead letters not forwarded", error=repr(exc), count=len(ids))

    def _deliver_one(self, ids: list[int]) -> None:
        try:
            jobs = self._fresh(self.db.dead_letters(ids))
        except psycopg.Error as exc:
            jlog.event(logger, logging.WARNING, "dead_letters_unavailable",
                       "could not read dead letters; retried", error=str(exc))
            self._stop.wait(self.backoff)
            self._enqueue(ids)
            return
        if jobs:
            self._post(jobs)

    def _fresh(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Those not posted yet and failed recently: a replayed message is not a new page."""
        horizon = datetime.now(timezone.utc) - timedelta(seconds=self.fresh_for)
        out = []
        for row in rows:
            if row["id"] in self._posted or (row["finished_at"] and row["finished_at"] < horizon):
                continue
            self._posted[row["id"]] = None
            out.append(_jsonable(row))
        while len(self._posted) > self.remembered:
            self._posted.popitem(last=False)
        return out

    def _post(self, jobs: list[dict[str, Any]]) -> None:
        body = json.dumps({"event": "dead_lettered", "count": len(jobs), "jobs": jobs}).encode()
        delay = self.backoff
        for attempt in range(1, self.attempts + 1):
            request = urllib.request.Request(
                self.webhook, data=body, method="POST",
                headers={"Content-Type": "application/json", "User-Agent": "jobfence"})
            try:
                with _OPENER.open(request, timeout=self.timeout) as reply:
                    reply.read()
                    if not 200 <= reply.status < 300:
                        raise OSError(f"HTTP {reply.status}: only 2xx is a delivery")
                self.forwarded += len(jobs)
                metrics.dead_letters("forwarded", len(jobs))
                jlog.event(logger, logging.INFO, "dead_letters_forwarded", "dead letters posted",
                           count=len(jobs), job_ids=[j["id"] for j in jobs])
                return
            except Exception as exc:  # noqa: BLE001 - any failure (HTTP, protocol, URL) is retried, never fatal to the thread
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
