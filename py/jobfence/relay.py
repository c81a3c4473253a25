"""The relay: pushes the ids that SQL producers announce with ``pg_notify('jobs_submitted')``.

Notifications are delivered only on commit (the outbox of docs/design.md §6) but only to a
connected listener: whatever was sent while the relay was away is found again by polling
``jobs.stale_queued`` — at every (re)connect, and every ``poll_interval`` while the LISTEN
connection is down — for every queue PostgreSQL names (``jobs.queues``) and those given on
the command line.

Any role that may connect can NOTIFY (and LISTEN on) any channel: PostgreSQL has no
privilege for either. So a payload is only a hint of which ids to look at. The relay accepts
the shapes the SQL producers send and nothing else, asks ``jobs.signals`` which of the ids
really wait for a signal and on which queue, and pushes only those, there; the rest is
logged (once a minute) and skipped (docs/security.md).

Many concurrent producers pay for notifying: PostgreSQL serialises notifying commits. With
``jobs.configure_relay('table')`` submits send nothing and the relay reads the new jobs from
the table instead (``jobs.poll_submitted``, every ``table_poll`` seconds), each stretch of ids
once it is final; notifications keep coming for what else announces itself (a debounce that
moves a job's run_after). docs/scaling.md says when to choose which.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from datetime import datetime
from typing import Iterable

import psycopg
import redis

from . import log as jlog
from . import sql
from .db import Database, listen_url
from .observe import process as metrics
from .transport import MAX_JOB_ID, Transport, key_text
from .retry import Backoff

logger = logging.getLogger("jobfence.relay")


# PostgreSQL refuses a NOTIFY payload of 8000 bytes or more; the producers send at most 300
# ids per message (db/deploy/insert_jobs.sql). Anything bigger was not sent by them.
MAX_PAYLOAD_CHARS = 8000
MAX_IDS_PER_NOTIFICATION = 1000
# One jobs.signals call per batch of notifications, bounded so that a flood of forged
# messages costs bounded statements.
SIGNALS_CHUNK = 10_000
WARN_EVERY_SECONDS = 60.0
# How often the relay asks how submits reach it (jobs.configure_relay), and how often it
# reads the table while they notify (only a stretch left from a table period can be there).
SOURCE_EVERY_SECONDS = 1.0
TABLE_READ_WHILE_NOTIFY = 0.5

_SINGLE_KEYS = frozenset({"id", "queue", "run_after"})
_BATCH_KEYS = (frozenset({"queue", "ids"}), frozenset({"queue", "ids", "run_after"}))


class BadNotification(ValueError):
    """A payload on jobs_submitted that no jobfence producer sends. Any role that may
    connect can NOTIFY any channel, so such a payload is data to refuse, not a bug."""


def _job_id(value) -> int:
    if type(value) is not int or not 1 <= value <= MAX_JOB_ID:
        raise BadNotification("ids must be integers in 1..2^63-1")
    return value


def _queue(value) -> str:
    if not isinstance(value, str) or not value:
        raise BadNotification("queue must be a non-empty string")
    return value


def _when(value) -> datetime | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise BadNotification("run_after must be a timestamp string")
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        raise BadNotification("run_after is not an ISO 8601 timestamp") from None


def parse_notification(payload: str) -> list[tuple[int, str, datetime | None]]:
    """``{"id", "queue", "run_after"}`` (one submit) or ``{"queue", "ids", ["run_after"]}``
    (submit_many / fan_out) -> (job_id, queue, run_after) triples, as the payload claims
    them. Anything else raises ``BadNotification``. The relay pushes none of these claims
    as such: it asks PostgreSQL (``jobs.signals``) where each id really goes."""
    if not isinstance(payload, str) or len(payload) > MAX_PAYLOAD_CHARS:
        raise BadNotification(f"payload over {MAX_PAYLOAD_CHARS} characters")
    try:
        data = json.loads(payload)
    except (ValueError, RecursionError):
        raise BadNotification("payload is not JSON") from None
    if not isinstance(data, dict):
        raise BadNotification("payload is not a JSON object")
    keys = frozenset(data)
    if keys == _SINGLE_KEYS:
        ids = [_job_id(data["id"])]
    elif keys in _BATCH_KEYS:
        raw = data["ids"]
        if not isinstance(raw, list) or not 1 <= len(raw) <= MAX_IDS_PER_NOTIFICATION:
            raise BadNotification(f"ids must be a list of 1..{MAX_IDS_PER_NOTIFICATION} ids")
        ids = [_job_id(i) for i in raw]
    else:
        raise BadNotification("payload keys are not those of a jobfence producer")
    queue, when = _queue(data["queue"]), _when(data.get("run_after"))
    return [(i, queue, when) for i in ids]


class Relay:
    def __init__(self, database_url: str, redis_url: str, *, poll_interval: float = 5.0,
                 stale_after: float = 5.0, queues: Iterable[str] = (),
                 listen_database_url: str | None = None, table_poll: float = 0.01,
                 table_batch: int = 10_000):
        # LISTEN needs a session of its own: behind a transaction pooler, a direct URL.
        self.url = listen_url(database_url, listen_database_url, "the relay")
        self.poll_interval = poll_interval
        self.stale_after = stale_after
        # Polled at every catch-up even if PostgreSQL does not name them (yet).
        self.queues: set[str] = set(queues) | {"default"}
        self.db = Database(database_url, max_size=2, name="jobfence-relay")
        self.transport = Transport(redis_url, namespace=self.db.redis_namespace)
        self._stop = threading.Event()
        self._warnings = jlog.Throttle(WARN_EVERY_SECONDS)
        self.pushed = 0
        self.skipped = 0
        self.table_poll = table_poll
        self.table_batch = table_batch
        self.source = "notify"
        self._source_read_at = float("-inf")
        self._table_read_at = float("-inf")

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
                    backoff.reset()
                    # Anything committed while nobody listened is only in PostgreSQL now,
                    # however recent: a notification sent a moment before LISTEN reached no
                    # one. Pushing every claimable job once is harmless (a duplicate claim is
                    # a no-op); waiting for stale_after would leave them to the reaper.
                    self.catch_up(older_than=0.0)
                    # Listening, and caught up: from here on, every submit is announced (its
                    # notification waits on the LISTEN connection since before the catch-up).
                    metrics.relay_listening(True)
                    jlog.event(logger, logging.INFO, "relay_listening",
                               "listening on jobs_submitted", queues=sorted(self.queues))
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
            self._read_table()
            ids: list[int] = []
            wait = self.table_poll if self.source == "table" else 0.5
            for note in self._next_notes(conn, wait=wait):
                try:
                    ids.extend(i for i, _, _ in parse_notification(note.payload))
                except BadNotification as exc:
                    self._warn("bad_notification", "ignored a notification no jobfence "
                               "producer sends", reason=str(exc), sender_pid=note.pid,
                               payload=ascii(note.payload[:120]))
            if ids:
                self._relay(ids)

    def _relay(self, ids: list[int]) -> None:
        """Push those of the announced ids that PostgreSQL says wait for a signal, onto the
        queue PostgreSQL names: a payload is a hint of which ids to look at, never of where
        to push them."""
        wanted = list(dict.fromkeys(ids))
        signals: list[tuple] = []
        for start in range(0, len(wanted), SIGNALS_CHUNK):
            chunk = wanted[start:start + SIGNALS_CHUNK]
            try:
                found = self.db.push_signals(chunk)
            except psycopg.OperationalError:
                raise  # run() reconnects, then catch_up pushes whatever this missed
            except psycopg.Error as exc:
                # The reaper re-pushes any of these jobs that stays queued (stale_after).
                self._warn("signals_failed", "could not look the announced ids up; the "
                           "reaper will re-push them", error=str(exc)[:300], count=len(chunk))
                continue
            signals += found
        skipped = len(wanted) - len(signals)
        if skipped:
            # Done, cancelled, already claimed, unknown or forged: nothing to wake.
            self.skipped += skipped
            found_ids = {s[0] for s in signals}
            self._warn("notification_ids_skipped", "announced ids that wait for no signal "
                       "were not pushed", count=skipped,
                       example_ids=[i for i in wanted if i not in found_ids][:5])
        if signals:
            self._push(signals)

    def _warn(self, event: str, message: str, **fields) -> None:
        held = self._warnings.allow(event)
        if held is None:
            return
        if held:
            fields["suppressed"] = held
        jlog.event(logger, logging.WARNING, event, message, **fields)

    def _read_table(self) -> None:
        """Push the new jobs of the table's next final stretches, when submits do not notify
        (or a stretch from when they did not is left)."""
        now = time.monotonic()
        if now - self._source_read_at >= SOURCE_EVERY_SECONDS:
            try:
                source = self.db.relay_source()
            except psycopg.OperationalError:
                raise
            except psycopg.Error as exc:
                self._warn("table_read_failed", "could not read how submits reach the relay; "
                           "retrying", error=str(exc)[:300])
                return
            if source != self.source:
                jlog.event(logger, logging.INFO, "relay_source", f"submits reach the relay by {source}",
                           source=source)
            self.source, self._source_read_at = source, now
        if self.source != "table" and now - self._table_read_at < TABLE_READ_WHILE_NOTIFY:
            return
        self._table_read_at = now
        while not self._stop.is_set():
            try:
                signals = self.db.poll_submitted(self.table_batch)
            except psycopg.OperationalError:
                raise  # run() reconnects; the stretch is still unread
            except psycopg.Error as exc:
                self._warn("table_read_failed", "could not read new jobs from the table; "
                           "retrying", error=str(exc)[:300])
                return
            if not signals:
                return
            self._push(signals)

    @staticmethod
    def _next_notes(conn: psycopg.Connection, limit: int = 1000, wait: float = 0.5) -> list:
        """The next batch of notifications: wait (briefly, so that stop() is noticed) for the
        first, then take whatever else has already arrived without waiting. A quiet relay
        pushes each notification at once; a busy one pushes up to ``limit`` per pipeline.
        (A single ``notifies(timeout=0.5, stop_after=limit)`` would hold a lone notification
        back for the whole half second.)"""
        notes = list(conn.notifies(timeout=wait, stop_after=1))
        while notes and len(notes) < limit:
            more = list(conn.notifies(timeout=0, stop_after=limit - len(notes)))
            if not more:
                break
            notes.extend(more)
        return notes

    def _push(self, signals: list[tuple]) -> None:
        try:
            failed = self.transport.push_each(signals)
        except redis.RedisError as exc:
            metrics.REDIS.failed()
            self._park([s[0] for s in signals], exc)
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
            self._park([s[0] for s in unsent], failed[0].error, quiet=True)

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
                    self.transport.ready_key(queue), exc, queue=key_text(queue))
                continue
            stale += [s.push_tuple() for s in found]
        if stale:
            self._push(stale)
            jlog.event(logger, logging.INFO, "relay_caught_up",
                       "re-pushed claimable jobs that may have missed their signal",
                       count=len(stale), queues=sorted({s[1] for s in stale}))
        return len(stale)

    def _poll_quietly(self) -> None:
        try:
            self._read_table()
            self.catch_up()
        except (psycopg.Error, redis.RedisError) as exc:
            # Both sides may be down; the next poll tries again.
            jlog.event(logger, logging.WARNING, "poll_failed", "catch-up poll failed; retrying",
                       error=str(exc))
