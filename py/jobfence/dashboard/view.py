"""Display rows for ``stats`` and ``top``: one place that turns ``jobs.queue_depth`` and
``jobs.metrics`` rows into cells, formats numbers and decides which of them are outside
their objective or alert bound (docs/observability.md)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timezone
from typing import Any, Callable, Iterable

from .snapshot import Snapshot

BACKLOG = ("queued_ready", "queued_delayed", "queued_blocked")
RATE_COUNTS = ("submitted", "succeeded", "failed")


@dataclass(frozen=True)
class Cell:
    text: str
    alert: bool = False


@dataclass(frozen=True)
class Table:
    headers: list[str]
    rows: list[list[Cell]]
    # Which columns hold figures (right-aligned in the live view).
    numeric: list[bool]

    @property
    def any_alert(self) -> bool:
        return any(c.alert for r in self.rows for c in r)

    def text_rows(self, mark: str = "!") -> list[list[str]]:
        return [[c.text + (mark if c.alert else "") for c in r] for r in self.rows]


# -- formatting -------------------------------------------------------------------------------
def seconds(value: float | None) -> str:
    if value is None:
        return "-"
    v = float(value)
    if v < 1:
        return f"{v * 1000:.3g}ms"
    if v < 59.95:
        return f"{v:.3g}s"
    whole = int(round(v))
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    if whole < 86400:
        return f"{whole // 3600}h{whole % 3600 // 60:02d}m"
    return f"{whole // 86400}d{whole % 86400 // 3600:02d}h"


def percent(value: float | None) -> str:
    if value is None:
        return "-"
    text = f"{float(value) * 100:.1f}%"
    # 99.96 % must not read as a clean 100 % when it missed the target.
    if text == "100.0%" and value < 1:
        return "99.9%"
    return text


def target(value: float | None) -> str:
    return "-" if value is None else f"{float(value) * 100:g}%"


def rate(value: float | None) -> str:
    if value is None:
        return "-"
    v = float(value)
    if v == 0:
        return "0"
    if v < 0.001:
        return "<0.001"
    if v < 1000:
        return f"{v:.3g}"
    return f"{v:.0f}"


def count(value: Any) -> str:
    return "-" if value is None else str(int(value))


def _over(value: float | None, bound: float | None) -> bool:
    return value is not None and bound is not None and value > bound


def _under(value: float | None, bound: float | None) -> bool:
    return value is not None and bound is not None and value < bound


# -- rates ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Rates:
    """Jobs per second for one kind: submitted, succeeded, failed attempts."""

    submitted: float | None
    succeeded: float | None
    failed: float | None
    # True when measured between two snapshots; False for the window's average.
    between: bool = False


def window_rates(row: dict) -> Rates:
    span = row.get("window_seconds")
    if not span:
        return Rates(None, None, None)
    return Rates(*(float(row[c] or 0) / span for c in RATE_COUNTS))


class RateTracker:
    """Rates from successive snapshots.

    ``jobs.metrics`` counts over a window that starts at a whole minute, so two snapshots
    with the same ``window_start`` differ by exactly what happened between them. When the
    window slides to the next minute the counts drop the oldest minute and cannot be
    subtracted; the last measured rates are kept for that one refresh.
    """

    def __init__(self) -> None:
        self._base: dict[str, tuple[float, Any, tuple]] = {}
        self._last: dict[str, Rates] = {}

    def update(self, snap: Snapshot) -> dict[str, Rates]:
        found: dict[str, Rates] = {}
        for row in snap.metrics:
            kind = row["kind"]
            counts = tuple(int(row[c] or 0) for c in RATE_COUNTS)
            rates = None
            base = self._base.get(kind)
            if base is not None:
                then, start, before = base
                elapsed = snap.monotonic - then
                if start == row.get("window_start") and elapsed > 0 \
                        and all(a >= b for a, b in zip(counts, before)):
                    rates = Rates(*((a - b) / elapsed for a, b in zip(counts, before)),
                                  between=True)
                else:
                    rates = self._last.get(kind)
            found[kind] = rates or window_rates(row)
            self._base[kind] = (snap.monotonic, row.get("window_start"), counts)
        self._last = found
        return found


# -- per kind ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class KindView:
    kind: str
    m: dict                 # the jobs.metrics row ({} when the kind has none)
    backlog: int            # queued_* over all its queues
    processing: int
    rates: Rates


def _kind_views(snap: Snapshot, rates: dict[str, Rates] | None) -> list[KindView]:
    metrics = {r["kind"]: r for r in snap.metrics}
    backlog: dict[str, int] = {}
    processing: dict[str, int] = {}
    for r in snap.depth:
        backlog[r["kind"]] = backlog.get(r["kind"], 0) + sum(int(r[c] or 0) for c in BACKLOG)
        processing[r["kind"]] = processing.get(r["kind"], 0) + int(r["processing"] or 0)
    views = []
    for kind in sorted(set(metrics) | set(backlog)):
        m = metrics.get(kind, {})
        views.append(KindView(kind, m, backlog.get(kind, 0), processing.get(kind, 0),
                              (rates or {}).get(kind) or window_rates(m)))
    return views


def _vs(value: float | None, bound: float | None, fmt: Callable) -> Cell:
    return Cell(f"{fmt(value)}/{fmt(bound)}", _over(value, bound))


def _slo(k: KindView) -> Cell:
    att, goal = k.m.get("slo_attainment"), k.m.get("slo_target")
    return Cell(f"{percent(att)}/{target(goal)}", _under(att, goal))


def _budget(k: KindView) -> Cell:
    left = k.m.get("error_budget_remaining")
    return Cell(percent(left) if left is not None else "-", left is not None and left <= 0)


def _burn(k: KindView) -> Cell:
    left = k.m.get("error_budget_remaining")
    burn = None if left is None else 1 - left
    # 1.0 spends the error budget exactly as fast as the target allows.
    return Cell("-" if burn is None else f"{burn:.2f}", _over(burn, 1.0))


def _success(k: KindView) -> Cell:
    value = k.m.get("success_rate")
    return Cell(percent(value), _under(value, k.m.get("slo_success_target")))


def _failed(k: KindView) -> Cell:
    return Cell(count(k.m.get("failed")),
                _over(k.m.get("failure_rate"), k.m.get("max_failure_rate")))


def _dead(k: KindView) -> Cell:
    dead = k.m.get("dead_lettered")
    return Cell(count(dead), bool(dead))


def _backlog(k: KindView) -> Cell:
    return Cell(str(k.backlog), _over(k.backlog, k.m.get("max_backlog")))


def _failed_rate(k: KindView) -> Cell:
    return Cell(rate(k.rates.failed), _over(k.m.get("failure_rate"), k.m.get("max_failure_rate")))


# header -> (cell, is a figure)
KIND_COLUMNS: dict[str, tuple[Callable[[KindView], Cell], bool]] = {
    "kind": (lambda k: Cell(k.kind), False),
    "submitted": (lambda k: Cell(count(k.m.get("submitted"))), True),
    "succeeded": (lambda k: Cell(count(k.m.get("succeeded"))), True),
    "failed": (_failed, True),
    "dead": (_dead, True),
    "ok/s": (lambda k: Cell(rate(k.rates.succeeded)), True),
    "in/s": (lambda k: Cell(rate(k.rates.submitted)), True),
    "failed/s": (_failed_rate, True),
    "backlog": (_backlog, True),
    "in flight": (lambda k: Cell(str(k.processing)), True),
    "run p95/budget": (lambda k: _vs(k.m.get("run_p95"), k.m.get("run_time_budget"), seconds),
                       True),
    "latency p95/slo": (lambda k: _vs(k.m.get("latency_p95"), k.m.get("slo_latency"), seconds),
                        True),
    "slo met/target": (_slo, True),
    "burn": (_burn, True),
    "budget left": (_budget, True),
    "success": (_success, True),
}

STATS_COLUMNS = ("kind", "submitted", "succeeded", "failed", "dead", "ok/s", "run p95/budget",
                 "latency p95/slo", "slo met/target", "budget left", "success")
TOP_COLUMNS = ("kind", "backlog", "in flight", "in/s", "ok/s", "failed/s", "dead",
               "run p95/budget", "latency p95/slo", "slo met/target", "burn", "budget left",
               "success")


def kinds_table(snap: Snapshot, columns: Iterable[str] = STATS_COLUMNS,
                rates: dict[str, Rates] | None = None) -> Table:
    """Per kind over the snapshot's window. ``rates`` (from a RateTracker) replace the
    window averages where given."""
    columns = list(columns)
    rows = [[KIND_COLUMNS[c][0](k) for c in columns] for k in _kind_views(snap, rates)]
    return Table(columns, rows, [KIND_COLUMNS[c][1] for c in columns])


# -- per queue and kind -------------------------------------------------------------------------
DEPTH_HEADERS = ["queue", "kind", "backlog", "ready", "delayed", "blocked", "in flight",
                 "expired", "enqueue failed", "oldest ready"]


def depth_table(snap: Snapshot) -> Table:
    """One row per queue and kind, as now."""
    bounds = {r["kind"]: r.get("max_backlog") for r in snap.metrics}
    totals: dict[str, int] = {}
    for r in snap.depth:
        totals[r["kind"]] = totals.get(r["kind"], 0) + sum(int(r[c] or 0) for c in BACKLOG)
    rows = []
    for r in sorted(snap.depth, key=lambda r: (r["queue"], r["kind"])):
        backlog = sum(int(r[c] or 0) for c in BACKLOG)
        rows.append([
            Cell(r["queue"]), Cell(r["kind"]),
            # The bound is the kind's, over all its queues.
            Cell(str(backlog), _over(totals[r["kind"]], bounds.get(r["kind"]))),
            Cell(count(r["queued_ready"])), Cell(count(r["queued_delayed"])),
            Cell(count(r["queued_blocked"])), Cell(count(r["processing"])),
            Cell(count(r["processing_expired"]), bool(r["processing_expired"])),
            Cell(count(r["enqueue_failed"]), bool(r["enqueue_failed"])),
            Cell(seconds(r["oldest_ready_age"])),
        ])
    return Table(list(DEPTH_HEADERS), rows, [False, False] + [True] * 8)


def window_caption(snap: Snapshot) -> str:
    """What window the per-kind figures cover, as the server read it."""
    row = next(iter(snap.metrics), None)
    if row is None or row.get("window_start") is None:
        return f"last {seconds(snap.since)}"
    start = row["window_start"]
    if hasattr(start, "astimezone"):
        start = start.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%SZ")
    return f"last {seconds(snap.since)} (whole minutes from {start}, {seconds(row['window_seconds'])})"
