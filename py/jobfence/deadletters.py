"""Dead letters page someone, and the page cannot vanish: deliver ``jobs.page`` to a webhook.

Every dead letter has a row in ``jobs.page``, written in the transaction that fails the job
(docs/observability.md, "Dead letters"). The reaper, given ``--dead-letter-webhook URL``,
runs one of these beside its sweep, in a thread of its own, so a slow or broken webhook
never delays a reap:

- it claims the pages due now (``jobs.claim_pages``: SKIP LOCKED, each held for longer than
  one attempt takes), so several reapers forward side by side without posting a page twice
  at once, and one killed mid-delivery leaves its pages to the next claim;
- it POSTs each page on its own, with the page's id in the ``Jobfence-Page-Id`` and
  ``Idempotency-Key`` headers: delivery is at least once, and a page posted twice carries
  the same id both times, for the receiver to deduplicate on;
- it settles them (``jobs.settle_pages``): a 2xx is a delivery; anything else is retried
  with a backoff that doubles up to ``retry_max``, for as long as it takes. Nothing is given
  up; ``jobfence pages`` lists what waits and why, and ``JobfencePagesUndelivered`` pages on
  it.

``NOTIFY jobs_dead_lettered`` only wakes the forwarder early; without it the forwarder looks
every ``poll`` seconds. The message's content is never read: anyone with CONNECT may send
one, and a flood of them costs one claim per wake-up, never a page.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import urllib.request
from datetime import datetime
from typing import Any

import psycopg

from . import log as jlog
from . import sql
from .db import Database
from .errors import JobfenceError
from .observe import process as metrics

logger = logging.getLogger("jobfence.deadletters")

CHANNEL = "jobs_dead_lettered"
PAGES_PER_CLAIM = 10


def _jsonable(row: dict[str, Any]) -> dict[str, Any]:
    return {k: (v.isoformat() if isinstance(v, datetime) else v) for k, v in row.items()}


def page_body(page: dict[str, Any]) -> bytes:
    """What is POSTed for one page: its id and attempt, and the dead letter it reports in
    ``jobs`` (a list of one, the shape receivers of batches already read)."""
    job = {"id": page["job_id"], "kind": page["kind"], "queue": page["queue"],
           "error": page["error"], "reason": page["reason"], "retry_count": page["retry_count"],
           "max_retries": page["max_retries"], "finished_at": page["failed_at"]}
    return json.dumps({"event": "dead_lettered", "page_id": page["id"],
                       "attempt": page["attempts"], "count": 1,
                       "jobs": [_jsonable(job)]}).encode()


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None  # urllib then raises HTTPError for the 3xx: a failed delivery


_OPENER = urllib.request.build_opener(_NoRedirect)


class DeadLetterForwarder:
    def __init__(self, database_url: str, db: Database, webhook: str, *, timeout: float = 5.0,
                 retry_base: float = 1.0, retry_max: float = 300.0, poll: float = 5.0):
        self.database_url = database_url
        self.db = db
        self.webhook = webhook
        self.timeout = timeout
        self.retry_base = retry_base
        self.retry_max = max(retry_base, retry_max)
        self.poll = poll
        # Longer than a claim's worth of attempts, each bounded by the timeout: a page is
        # never taken by a second forwarder while the first may still be posting it.
        self.hold = PAGES_PER_CLAIM * timeout + 2.0
        self.forwarded = 0
        self.failed = 0
        self.listening = threading.Event()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._failures = jlog.Tally(60.0)
        self._threads = [threading.Thread(target=self._listen, name="deadletters-listen", daemon=True),
                         threading.Thread(target=self._deliver, name="deadletters-post", daemon=True)]

    def start(self) -> None:
        for t in self._threads:
            t.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        for t in self._threads:
            t.join(self.timeout + 2)

    # -- waking -------------------------------------------------------------------------
    def _listen(self) -> None:
        delay = 1.0
        while not self._stop.is_set():
            try:
                with psycopg.connect(self.database_url, autocommit=True, connect_timeout=5) as conn:
                    conn.execute(sql.LISTEN_DEAD_LETTERED)
                    self.listening.set()
                    jlog.event(logger, logging.INFO, "dead_letters_listening",
                               "forwarding dead-letter pages", webhook=self.webhook)
                    delay = 1.0
                    self._wake.set()  # pages written while nobody listened
                    while not self._stop.is_set():
                        for _ in conn.notifies(timeout=0.5):
                            self._wake.set()
            except psycopg.Error as exc:
                self.listening.clear()
                jlog.event(logger, logging.WARNING, "dead_letters_unavailable",
                           f"LISTEN lost; pages are still looked for every {self.poll:g}s; "
                           f"LISTEN again in {delay:.0f}s", error=str(exc))
                self._stop.wait(delay)
                delay = min(delay * 2, 30.0)
        self.listening.clear()

    # -- delivering ---------------------------------------------------------------------
    def _deliver(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self.poll)
            self._wake.clear()
            try:
                # A full claim means more are due: go again at once.
                while not self._stop.is_set() and self.forward_due() >= PAGES_PER_CLAIM:
                    pass
            except (psycopg.Error, JobfenceError) as exc:
                jlog.event(logger, logging.WARNING, "dead_letters_unavailable",
                           f"could not read the pages; again in {self.poll:g}s", error=str(exc))
            except Exception:  # noqa: BLE001 - the thread must outlive any one page
                logger.error("unexpected error while forwarding pages; they stay undelivered "
                             "and are retried", exc_info=True,
                             extra={"event": "dead_letters_error", "fields": {}})

    def forward_due(self) -> int:
        """Claim the pages due now, post each, settle them; returns how many were claimed."""
        pages = self.db.claim_pages(PAGES_PER_CLAIM, self.hold)
        outcomes = [(page["id"], self._post(page)) for page in pages]
        if outcomes:
            self.db.settle_pages(outcomes, self.retry_base, self.retry_max)
        return len(pages)

    def _post(self, page: dict[str, Any]) -> str | None:
        """None when delivered, else why not."""
        request = urllib.request.Request(
            self.webhook, data=page_body(page), method="POST",
            headers={"Content-Type": "application/json", "User-Agent": "jobfence",
                     "Jobfence-Page-Id": str(page["id"]),
                     "Idempotency-Key": f"jobfence-page-{page['id']}"})
        started = time.monotonic()
        try:
            with _OPENER.open(request, timeout=self.timeout) as reply:
                reply.read()
                if not 200 <= reply.status < 300:
                    raise OSError(f"HTTP {reply.status}: only 2xx is a delivery")
        except Exception as exc:  # noqa: BLE001 - any failure (HTTP, protocol, URL) is retried, never fatal to the thread
            error = " ".join(str(exc).split()) or type(exc).__name__
            self.failed += 1
            metrics.dead_letters("failed", 1)
            count = self._failures.add()
            if count is not None:
                jlog.event(logger, logging.WARNING, "dead_letters_post_failed",
                           "webhook failed; the page stays undelivered and is retried with "
                           "backoff (count: attempts since the last line)", error=error,
                           count=count, page_id=page["id"], job_id=page["job_id"],
                           attempt=page["attempts"])
            return error
        self.forwarded += 1
        metrics.dead_letters("forwarded", 1)
        jlog.event(logger, logging.INFO, "dead_letters_forwarded", "dead-letter page posted",
                   page_id=page["id"], job_id=page["job_id"], attempt=page["attempts"],
                   ms=round((time.monotonic() - started) * 1000, 1))
        return None
