"""Structured logging: one line per event, ``--log-format json`` (one JSON object per line)
or ``text`` (key=value). Every job line carries job_id, lease_version and worker so a job's
history can be followed across processes with grep or jq. Every line goes through
``redact.text``: no password reaches a log."""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
from collections import defaultdict
from datetime import datetime, timezone
from typing import Any

from . import redact

_STATIC: dict[str, Any] = {}


class _JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line = {
            "ts": datetime.fromtimestamp(record.created, timezone.utc).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "event": getattr(record, "event", None) or "log",
            "msg": record.getMessage(),
        }
        line.update(_STATIC)
        line.update(getattr(record, "fields", {}) or {})
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        # Last, over the whole line: a password can hide in any field or message.
        return redact.text(json.dumps(line, default=str))


class _TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        ts = time.strftime("%H:%M:%S", time.localtime(record.created))
        fields = dict(_STATIC)
        fields.update(getattr(record, "fields", {}) or {})
        event = getattr(record, "event", None)
        parts = [f"{ts}.{int(record.msecs):03d}", f"{record.levelname:<7}"]
        if event:
            parts.append(event)
        parts.append(record.getMessage())
        parts.extend(f"{k}={v}" for k, v in fields.items() if v is not None)
        text = " ".join(parts)
        if record.exc_info:
            text += "\n" + self.formatException(record.exc_info)
        return redact.text(text)


class _RedactingFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return redact.text(super().format(record))


def redact_last_resort() -> None:
    """A command that configures no logging still prints library warnings on stderr (the
    pool's "error connecting ..." quotes a malformed URL whole): through ``redact`` too."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setLevel(logging.WARNING)
    handler.setFormatter(_RedactingFormatter("%(message)s"))
    logging.lastResort = handler


def setup(fmt: str = "text", level: str = "INFO", stream=None, **static: Any) -> None:
    """Configure the root logger for a jobfence process; ``static`` fields (role, worker)
    are added to every line."""
    _STATIC.clear()
    _STATIC.update({k: v for k, v in static.items() if v is not None})
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(_JsonFormatter() if fmt == "json" else _TextFormatter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    # Library chatter (pool reconnect attempts every few ms) would drown our own lines.
    logging.getLogger("psycopg").setLevel(logging.WARNING)
    logging.getLogger("psycopg.pool").setLevel(logging.ERROR)


def event(logger: logging.Logger, level: int, name: str, msg: str, **fields: Any) -> None:
    logger.log(level, msg, extra={"event": name, "fields": fields})


class Throttle:
    """At most one line per key every ``every`` seconds: a fault that stays (a server away,
    a corrupt key) must not write a line per attempt. ``allow`` answers None while a key is
    held back, else how many were held back since its last line; ``forget`` makes the next
    line of a key due at once (after a recovery, the next fault is news)."""

    def __init__(self, every: float):
        self.every = every
        self._last: dict[Any, float] = {}
        self._held: dict[Any, int] = defaultdict(int)
        self._lock = threading.Lock()

    def allow(self, key: Any = None) -> int | None:
        now = time.monotonic()
        with self._lock:
            last = self._last.get(key)
            if last is not None and now - last < self.every:
                self._held[key] += 1
                return None
            self._last[key] = now
            return self._held.pop(key, 0)

    def forget(self, key: Any = None) -> None:
        with self._lock:
            self._last.pop(key, None)
            self._held.pop(key, None)


class Tally:
    """A count per key, said at most once every ``every`` seconds: ``add`` answers None
    while the key's line is held back, else how many were added since its last line. For
    faults anyone can repeat at will (junk in Redis, ids of another deployment, dead
    connections after a restart): one line a minute says how often, not a line each."""

    def __init__(self, every: float):
        self._throttle = Throttle(every)
        self._lock = threading.Lock()
        self._pending: dict[Any, int] = defaultdict(int)

    def add(self, key: Any = None, n: int = 1) -> int | None:
        with self._lock:
            self._pending[key] += n
            if self._throttle.allow(key) is None:
                return None
            return self._pending.pop(key)
