"""What the dashboard reads and does, through the API's ``AsyncClient`` and the named
statements of ``jobfence.sql``: the numbers are those of ``jobfence stats`` / ``top``
(``dashboard.snapshot`` and ``dashboard.view``), never recomputed here."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import psycopg
from psycopg.rows import dict_row

from .. import redact, rows, sql
from ..aio import AsyncClient
from ..dashboard.snapshot import Snapshot
from ..errors import translate

# The window of the overview's per-kind figures, as `jobfence top`'s default.
OVERVIEW_SECONDS = 300
# Minutes of history in the charts.
CHART_MINUTES = 15
# The dead-letter page groups the newest failed jobs, at most this many (one list_jobs page).
DEAD_LETTER_SCAN = 1000
# The health page names workers seen on running jobs among at most this many.
RUNNING_SCAN = 1000
# A replay of a selection, in one transaction; larger groups are replayed in several clicks.
MAX_REPLAY = 1000


async def _in_transaction(client: AsyncClient, work, *, read_only: bool):
    async with client.connection() as conn:
        try:
            async with conn.transaction():
                if read_only:
                    # Both relations in one snapshot, so the backlog and the counts agree.
                    await conn.execute(sql.READ_ONLY_SNAPSHOT)
                return await work(conn)
        except psycopg.Error as exc:
            mapped = translate(exc)
            if mapped is exc:
                raise
            raise mapped from exc


async def _rows(conn, query, params=None, row_factory=dict_row) -> list:
    async with conn.cursor(row_factory=row_factory) as cur:
        await cur.execute(query, params)
        return await cur.fetchall()


@dataclass(frozen=True)
class Minutes:
    """Per-minute counts by kind, oldest minute first (the current minute last, partial)."""

    starts: list[datetime]
    counts: dict[str, dict[str, list[int]]]   # kind -> column -> one count per minute

    def series(self, column: str) -> dict[str, list[int]]:
        return {kind: cols[column] for kind, cols in self.counts.items()}

    def total(self, column: str) -> list[int]:
        return [sum(v[i] for v in self.series(column).values()) for i in range(len(self.starts))]

    def last_minute_with(self, column: str) -> datetime | None:
        for i in range(len(self.starts) - 1, -1, -1):
            if any(cols[column][i] for cols in self.counts.values()):
                return self.starts[i]
        return None


MINUTE_COLUMNS = ("submitted", "succeeded", "failed", "reaped", "dead_lettered")


def minutes_from_windows(found: list[dict]) -> Minutes:
    """Window k covers the last k whole minutes and the current one; the difference of two
    neighbours is one minute."""
    by_k: dict[int, dict[str, dict]] = defaultdict(dict)
    starts: dict[int, datetime] = {}
    for r in found:
        by_k[r["k"]][r["kind"]] = r
        starts[r["k"]] = r["window_start"]
    ks = sorted(by_k)
    kinds = sorted({kind for w in by_k.values() for kind in w})
    counts: dict[str, dict[str, list[int]]] = {k: {c: [] for c in MINUTE_COLUMNS} for k in kinds}
    for k in reversed(ks):
        for kind in kinds:
            here = by_k[k].get(kind, {})
            newer = by_k.get(k - 1, {}).get(kind, {}) if k > 0 else {}
            for c in MINUTE_COLUMNS:
                counts[kind][c].append(int(here.get(c) or 0) - int(newer.get(c) or 0))
    return Minutes([starts[k] for k in reversed(ks)], counts)


@dataclass(frozen=True)
class Overview:
    snap: Snapshot
    minutes: Minutes
    paused: dict[str, datetime]     # queue -> paused since


async def overview(client: AsyncClient, since: float = OVERVIEW_SECONDS,
                   minutes: int = CHART_MINUTES) -> Overview:
    async def read(conn):
        depth = await _rows(conn, sql.QUEUE_DEPTH)
        metrics = await _rows(conn, sql.METRICS, {"since": timedelta(seconds=since)})
        windows = await _rows(conn, sql.METRIC_WINDOWS, {"minutes": minutes})
        paused = await _rows(conn, sql.PAUSED_QUEUES)
        return depth, metrics, windows, paused

    depth, metrics, windows, paused = await _in_transaction(client, read, read_only=True)
    snap = Snapshot.from_rows(since, depth, metrics)
    return Overview(snap, minutes_from_windows(windows),
                    {r["queue"]: r["paused_at"] for r in paused})


# -- dead letters -----------------------------------------------------------------------------
@dataclass
class Group:
    """Dead letters of one kind with the same error text."""

    kind: str
    error: str | None
    ids: list[int] = field(default_factory=list)
    newest: datetime | None = None
    reasons: set[str] = field(default_factory=set)

    @property
    def headline(self) -> str:
        return error_line(self.error)


def error_line(error: str | None) -> str:
    first = (error or "").strip().splitlines()
    return first[0][:300] if first else "(no error text)"


def like_exactly(text: str) -> str:
    """A LIKE pattern that matches ``text`` and nothing else."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


async def dead_letter_groups(client: AsyncClient, kind: str | None = None
                             ) -> tuple[list[Group], int]:
    """The newest failed jobs (at most DEAD_LETTER_SCAN) that are dead letters, grouped by
    kind and error; and how many failed jobs were looked at."""
    failed = await client.list_jobs(kind=kind, status="failed", max_jobs=DEAD_LETTER_SCAN)
    if not failed:
        return [], 0
    letters = await client._all(sql.DEAD_LETTERS, {"job_ids": [j.id for j in failed]})
    groups: dict[tuple[str, str], Group] = {}
    for d in sorted(letters, key=lambda d: d["id"], reverse=True):
        key = (d["kind"], d["error"])
        group = groups.setdefault(key, Group(*key))
        group.ids.append(d["id"])
        group.reasons.add(d["reason"])
        if d["finished_at"] is not None and (group.newest is None or d["finished_at"] > group.newest):
            group.newest = d["finished_at"]
    ordered = sorted(groups.values(), key=lambda g: (-len(g.ids), g.kind, g.error or ""))
    return ordered, len(failed)


@dataclass(frozen=True)
class ReplaySummary:
    replayed: list[int]
    already_done: list[int]
    refused: dict[int, str]      # id -> why (not failed any more, unknown)
    enqueued: bool


async def replay_ids(client: AsyncClient, job_ids: list[int]) -> ReplaySummary:
    """``jobs.replay`` for each id inside ONE transaction, then one Redis push for the
    replayed ones, as the API's replay route signals (``AsyncClient._signal_ids``). A job
    that is no longer failed is skipped (a savepoint keeps the others), not a reason to
    replay nothing."""
    ids = sorted(set(job_ids))[:MAX_REPLAY]

    async def replay(conn):
        replayed, done, refused = [], [], {}
        for job_id in ids:
            try:
                async with conn.transaction():
                    (found,) = await _rows(conn, sql.REPLAY, {"job_id": job_id})
            except psycopg.Error as exc:
                mapped = translate(exc)
                if mapped is exc:
                    raise
                refused[job_id] = redact.text(getattr(mapped, "message", str(mapped)))
                continue
            (replayed if found["replayed"] else done).append(job_id)
        return replayed, done, refused

    replayed, done, refused = await _in_transaction(client, replay, read_only=False)
    enqueued = await client._signal_ids(replayed)
    return ReplaySummary(replayed, done, refused, enqueued)


async def replay_group(client: AsyncClient, kind: str, error: str) -> ReplaySummary:
    """Every failed job of ``kind`` whose error is exactly ``error`` (at most MAX_REPLAY,
    oldest failure first): ``jobs.replay_many``, one transaction, then pushed as above."""
    ids, enqueued = await client.replay_many(kind, error_like=like_exactly(error),
                                             max_jobs=MAX_REPLAY)
    return ReplaySummary(sorted(ids), [], {}, enqueued)


# -- health -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class WorkerSeen:
    name: str
    running: int
    last_claim: datetime | None
    lease_until: datetime | None


@dataclass(frozen=True)
class Health:
    checks: dict[str, str]
    workers: list[WorkerSeen]
    running_scanned: int
    enqueue_failed: list[rows.Job]
    enqueue_failed_total: int
    expired_leases: int
    minutes: Minutes | None


async def _probe(probe) -> str:
    try:
        await asyncio.wait_for(probe(), 2.0)
        return "ok"
    except asyncio.TimeoutError:
        return "no answer within 2 s"
    except Exception as exc:  # noqa: BLE001 - the failure is what the page shows
        return redact.text(f"{type(exc).__name__}: {str(exc).strip()[:200]}").rstrip(": ")


async def health(client: AsyncClient) -> Health:
    checks = {"postgresql": await _probe(client.queues), "redis": await _probe(client.redis.ping)}
    if checks["postgresql"] != "ok":
        return Health(checks, [], 0, [], 0, 0, None)
    running = await client.list_jobs(status="processing", max_jobs=RUNNING_SCAN)
    by_worker: dict[str, list[rows.Job]] = defaultdict(list)
    for job in running:
        by_worker[job.owned_by or "(unnamed)"].append(job)
    workers = [WorkerSeen(name, len(jobs), max((j.claimed_at for j in jobs if j.claimed_at),
                                                default=None),
                          max((j.lease_expires_at for j in jobs if j.lease_expires_at),
                              default=None))
               for name, jobs in sorted(by_worker.items())]
    parked = await client.list_jobs(status="enqueue_failed", max_jobs=50)
    ov = await overview(client)
    parked_total = sum(int(r["enqueue_failed"] or 0) for r in ov.snap.depth)
    expired = sum(int(r["processing_expired"] or 0) for r in ov.snap.depth)
    return Health(checks, workers, len(running), parked, parked_total, expired, ov.minutes)

