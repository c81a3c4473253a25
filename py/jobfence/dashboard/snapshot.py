"""One consistent reading of the observability numbers (docs/observability.md)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

import psycopg
from psycopg import IsolationLevel
from psycopg.rows import dict_row

from .. import sql
from ..db import Database, connect_kwargs


@dataclass(frozen=True)
class Snapshot:
    """``jobs.queue_depth`` and ``jobs.metrics(since)`` read in one transaction."""

    since: float
    depth: list[dict]
    metrics: list[dict]
    taken_at: datetime = field(default_factory=lambda: datetime.now(timezone.utc))
    # Rates between two snapshots are divided by local elapsed time, which must not jump
    # when the wall clock is adjusted.
    monotonic: float = field(default_factory=time.monotonic)

    @classmethod
    def from_rows(cls, since: float, depth, metrics) -> "Snapshot":
        """A snapshot of the rows of ``jobs.queue_depth`` and ``jobs.metrics`` as read, by
        the terminal dashboard and the web one alike."""
        return cls(since=float(since), depth=[_plain(r) for r in depth],
                   metrics=[_plain(r) for r in metrics])

    def to_json(self) -> dict:
        return {"since_seconds": self.since, "taken_at": self.taken_at.isoformat(),
                "queue_depth": self.depth, "metrics": self.metrics}


def _plain(row: dict) -> dict:
    # numeric columns (slo_target, ...) arrive as Decimal and intervals as timedelta; every
    # consumer (the tables, JSON) wants plain numbers of seconds.
    out: dict[str, Any] = {}
    for key, value in row.items():
        if isinstance(value, Decimal):
            value = float(value)
        elif isinstance(value, timedelta):
            value = value.total_seconds()
        out[key] = value
    return out


class Reader:
    """Reads snapshots over one connection of its own, opened on demand.

    A plain connection rather than a pool: a failed connect is reported at once with
    libpq's reason (refused, unknown host, authentication), and a dashboard that polls
    needs no more than one connection. After a connection error the next ``read``
    connects again, so ``top`` recovers by itself when PostgreSQL comes back.
    """

    def __init__(self, url: str, *, connect_timeout: float = 3.0,
                 statement_timeout: float = 10.0, name: str = "jobfence-stats"):
        self.url = url
        self.connect_timeout = connect_timeout
        self.statement_timeout = statement_timeout
        self.name = name
        self._conn: psycopg.Connection | None = None

    def _connection(self) -> psycopg.Connection:
        if self._conn is None or self._conn.closed:
            kwargs = connect_kwargs(self.name, self.statement_timeout)
            self._local_timeout = "options" not in kwargs
            conn = psycopg.connect(self.url, connect_timeout=max(1, int(round(self.connect_timeout))),
                                   **kwargs)
            # Both views in one snapshot, so the backlog and the window's counts agree.
            conn.isolation_level = IsolationLevel.REPEATABLE_READ
            conn.read_only = True
            self._conn = conn
        return self._conn

    def read(self, since: float) -> Snapshot:
        conn = self._connection()
        try:
            with conn.transaction():
                if self._local_timeout:
                    conn.execute(sql.SET_LOCAL_STATEMENT_TIMEOUT.format(
                        ms=int(self.statement_timeout * 1000)))
                depth = Database.run(conn, sql.QUEUE_DEPTH, None, dict_row)
                metrics = Database.run(conn, sql.METRICS,
                                       {"since": timedelta(seconds=float(since))}, dict_row)
        except psycopg.OperationalError:
            self.close()
            raise
        return Snapshot.from_rows(since, depth, metrics)

    def close(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            finally:
                self._conn = None

    def __enter__(self) -> "Reader":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
