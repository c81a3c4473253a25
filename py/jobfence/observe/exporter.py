"""The Prometheus exporter behind ``jobfence metrics``.

A scrape reads PostgreSQL, where the truth is: ``jobs.queue_depth`` once and
``jobs.metrics(window)`` once per window (the main one and the burn-rate windows), then
turns the rows into gauges. Nothing is cached between scrapes, so two exporters on one
database answer the same, and a restarted exporter loses nothing: every window count is a
sliding count PostgreSQL keeps, not a counter this process would have to remember.

A scrape never raises: whatever goes wrong while reading (server down, a missing grant,
a schema not deployed yet) becomes ``jobfence_up 0`` and a logged warning, so Prometheus
keeps getting an answer and the alert on ``jobfence_up`` fires instead of a silent gap.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from datetime import timedelta
from decimal import Decimal
from typing import Any, Iterable, Iterator, Sequence

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import CollectorRegistry

from .. import log as jlog

logger = logging.getLogger("jobfence.exporter")

DEFAULT_WINDOW = 300
# The multiwindow burn-rate pairs of the alert rules: 1h with 5m (fast burn) and 6h with
# 30m (slow burn), so an alert fires on a real trend and clears soon after it ends.
DEFAULT_BURN_WINDOWS = (1800, 3600, 21600)

# jobs.queue_depth column -> value of the ``state`` label.
DEPTH_STATES = (
    ("queued_ready", "ready"),
    ("queued_delayed", "delayed"),
    ("queued_blocked", "blocked"),
    ("processing", "processing"),
    ("processing_expired", "processing_expired"),
    ("enqueue_failed", "enqueue_failed"),
)
# What is due now: a job scheduled for tomorrow (queued_delayed) is not work yet.
BACKLOG_COLUMNS = ("queued_ready", "queued_blocked")

# jobs.metrics count column -> metric name (jobfence_window_<name>).
WINDOW_COUNTS = (
    ("submitted", "jobs created (submitted events)"),
    ("started", "attempts started (claims)"),
    ("succeeded", "jobs that reached done"),
    ("failed", "attempts that ended in failure (retried, reaped, timed out, exhausted, failed for good)"),
    ("retried", "failed attempts that were queued again (reaped and timed-out ones included)"),
    ("reaped", "leases whose heartbeats stopped before the timeout (a timeout counts in failed)"),
    ("cancelled", "jobs cancelled"),
    ("dead_lettered", "jobs that reached failed: retries exhausted or a fatal error"),
    ("slo_met", "terminal jobs that were terminal within slo_latency of submission"),
)
RETRY_BUCKETS = (("ended_after_0", "0"), ("ended_after_1", "1"), ("ended_after_2", "2"),
                 ("ended_after_3_plus", "3+"))
QUANTILES = (("p50", "0.5"), ("p95", "0.95"), ("p99", "0.99"))
DURATIONS = (
    ("wait", "queue wait: submission to first claim"),
    ("run", "run time of the last attempt: claim to terminal"),
    ("latency", "submission to terminal"),
)
# jobs.metrics ratio column -> metric name.
RATIOS = (
    ("slo_attainment", "slo_attainment_ratio", "share of terminal jobs that met slo_latency"),
    ("error_budget_remaining", "error_budget_remaining_ratio",
     "1 - (1 - slo_attainment) / (1 - slo_target): 1 untouched, 0 spent, below 0 overspent"),
    ("success_rate", "success_ratio", "succeeded / (succeeded + dead_lettered)"),
    ("dead_letter_rate", "dead_letter_ratio", "dead_lettered / (succeeded + dead_lettered)"),
    ("failure_rate", "failure_ratio", "failed / (succeeded + failed): attempts"),
)
# jobs.metrics objective/bound column -> metric name (jobfence_kind_<name>).
BOUNDS = (
    ("slo_latency", "slo_latency_seconds", "the kind's latency objective"),
    ("slo_target", "slo_target_ratio", "share of jobs that must meet slo_latency"),
    ("slo_success_target", "slo_success_target_ratio", "share of ended jobs that must succeed"),
    ("max_backlog", "max_backlog", "alert bound on the kind's backlog (queued jobs)"),
    ("run_time_budget", "run_time_budget_seconds",
     "alert bound on the p95 run time (half the kind's timeout when not set)"),
    ("max_failure_rate", "max_failure_ratio", "alert bound on failure_ratio"),
)

# While the database stays unreachable, one warning per this many seconds is enough.
WARN_EVERY_SECONDS = 60.0


def window_label(seconds: float) -> str:
    """``300`` -> ``5m``, ``3600`` -> ``1h``: the value of the ``window`` label."""
    whole = int(seconds)
    if whole != seconds or whole <= 0:
        return f"{seconds:g}s"
    for size, unit in ((86400, "d"), (3600, "h"), (60, "m")):
        if whole % size == 0:
            return f"{whole // size}{unit}"
    return f"{whole}s"


def _number(value: Any) -> float | None:
    """A finite float, or None for NULL (nothing to divide by) and non-numbers."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, (int, float, Decimal)):
        number = float(value)
        return number if math.isfinite(number) else None
    return None


def burn_rate(share: Any, target: Any) -> float | None:
    """How fast an error budget burns: the share of bad events over the share allowed
    (1 = exactly on budget over the SLO period, 14.4 = a 30-day budget gone in 2 days)."""
    good, goal = _number(share), _number(target)
    if good is None or goal is None or goal >= 1:
        return None
    return (1.0 - good) / (1.0 - goal)


class JobfenceCollector:
    """A custom collector: every scrape asks PostgreSQL afresh (``collect``)."""

    def __init__(self, db, *, window: float = DEFAULT_WINDOW,
                 burn_windows: Iterable[float] = DEFAULT_BURN_WINDOWS):
        self.db = db
        self.window = float(window)
        self.windows: list[float] = sorted({self.window, *(float(w) for w in burn_windows)})
        self.scrape_errors = 0
        self._lock = threading.Lock()
        self._down_since: float | None = None
        self._warnings = jlog.Throttle(WARN_EVERY_SECONDS)

    # -- reading ---------------------------------------------------------------------------
    def read(self) -> tuple[list[dict], dict[float, list[dict]], dict]:
        """(queue_depth rows, metrics rows per window, the dead-letter page backlog)."""
        depth = self.db.queue_depth()
        by_window = {w: self.db.metrics(w) for w in self.windows}
        return depth, by_window, self.db.page_backlog()

    def collect(self) -> Iterator:
        started = time.monotonic()
        # Scrapes may overlap (a slow database, two Prometheus servers): one reads at a
        # time, so a slow server is not asked the same question twice over.
        with self._lock:
            try:
                depth, by_window, pages = self.read()
                families = list(self.families(depth, by_window, pages))
                up = 1.0
            except Exception as exc:  # noqa: BLE001 - a scrape must answer, whatever failed
                self.scrape_errors += 1
                self._note_failure(exc)
                families, up = [], 0.0
            else:
                self._note_success()
            yield from families
            yield _gauge("jobfence_up", "1 when the last scrape read PostgreSQL, 0 when it "
                         "failed (see the exporter's log)", [], [([], up)])
            yield _gauge("jobfence_exporter_scrape_duration_seconds",
                         "time the last scrape took", [], [([], time.monotonic() - started)])
            errors = CounterMetricFamily("jobfence_exporter_scrape_errors",
                                         "scrapes that could not read PostgreSQL")
            errors.add_metric([], float(self.scrape_errors))
            yield errors

    def _note_failure(self, exc: BaseException) -> None:
        if self._down_since is None:
            self._down_since = time.monotonic()
        if self._warnings.allow() is not None:
            jlog.event(logger, logging.WARNING, "scrape_failed",
                       "could not read PostgreSQL; answering jobfence_up 0",
                       error=_first_line(exc), reason=self._why_no_connection(exc),
                       sqlstate=getattr(exc, "sqlstate", None),
                       failed_scrapes=self.scrape_errors)

    def _why_no_connection(self, exc: BaseException) -> str | None:
        """A pool that timed out only says it waited; one direct attempt says why (refused,
        bad password, no such database). Only when a warning is logged, so at most once a
        minute."""
        if type(exc).__name__ != "PoolTimeout" or not hasattr(self.db, "why_unreachable"):
            return None
        direct = self.db.why_unreachable(timeout=2)
        return _first_line(direct) if direct is not None else None

    def _note_success(self) -> None:
        if self._down_since is not None:
            self._warnings.forget()  # the next outage is news at once
            jlog.event(logger, logging.INFO, "scrape_recovered", "PostgreSQL read again",
                       down_seconds=round(time.monotonic() - self._down_since, 1))
            self._down_since = None

    # -- rows -> metric families -----------------------------------------------------------
    def families(self, depth: Sequence[dict], by_window: dict[float, list[dict]],
                 pages: dict | None = None) -> Iterator:
        yield from depth_families(depth)
        yield from window_families(by_window)
        yield from bound_families(by_window.get(self.window) or [])
        yield from page_families(pages)


def page_families(backlog: dict | None) -> Iterator[GaugeMetricFamily]:
    """The dead-letter pages not delivered yet: what JobfencePagesUndelivered pages on."""
    backlog = backlog or {}
    yield _gauge("jobfence_pages_undelivered", "dead-letter pages not delivered to the webhook "
                 "yet (jobfence pages lists them)", [], [([], float(backlog.get("undelivered") or 0))])
    yield _gauge("jobfence_pages_failing", "undelivered pages whose delivery was attempted "
                 "and failed at least once", [], [([], float(backlog.get("failing") or 0))])
    oldest = backlog.get("oldest_at")
    age = max(0.0, time.time() - oldest.timestamp()) if oldest is not None else 0.0
    yield _gauge("jobfence_pages_oldest_undelivered_age_seconds", "age of the oldest "
                 "undelivered page (0 when none waits)", [], [([], age)])


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


def _gauge(name: str, doc: str, labels: list[str], samples) -> GaugeMetricFamily:
    family = GaugeMetricFamily(name, doc, labels=labels)
    for values, value in samples:
        family.add_metric(values, value)
    return family


def depth_families(rows: Sequence[dict]) -> Iterator[GaugeMetricFamily]:
    depth = GaugeMetricFamily("jobfence_queue_depth", "jobs of a queue and kind by state "
                              "(jobs.queue_depth)", labels=["queue", "kind", "state"])
    backlog = GaugeMetricFamily("jobfence_queue_backlog", "queued jobs that are due (ready + "
                                "blocked; not delayed) of a queue and kind", labels=["queue", "kind"])
    oldest = GaugeMetricFamily("jobfence_queue_oldest_ready_age_seconds",
                               "how long the oldest claimable job has been due (0 when none)",
                               labels=["queue", "kind"])
    for row in rows:
        key = [str(row["queue"]), str(row["kind"])]
        for column, state in DEPTH_STATES:
            depth.add_metric(key + [state], _number(row.get(column)) or 0.0)
        backlog.add_metric(key, sum(_number(row.get(c)) or 0.0 for c in BACKLOG_COLUMNS))
        oldest.add_metric(key, _number(row.get("oldest_ready_age")) or 0.0)
    yield depth
    yield backlog
    yield oldest


def window_families(by_window: dict[float, list[dict]]) -> Iterator[GaugeMetricFamily]:
    labels = ["kind", "queue", "window"]
    seconds = GaugeMetricFamily("jobfence_window_seconds", "length of the window actually "
                                "read (whole minutes up to now)", labels=["window"])
    counts = {name: GaugeMetricFamily(f"jobfence_window_{name}", f"{doc}, in the window",
                                      labels=labels) for name, doc in WINDOW_COUNTS}
    retries = GaugeMetricFamily("jobfence_window_ended_by_retries", "terminal jobs in the "
                                "window by the retries they took", labels=labels + ["retries"])
    durations = {name: GaugeMetricFamily(f"jobfence_window_{name}_seconds",
                                         f"{doc}, percentiles over the window",
                                         labels=labels + ["quantile"])
                 for name, doc in DURATIONS}
    ratios = {column: GaugeMetricFamily(f"jobfence_window_{name}", f"{doc}, in the window",
                                        labels=labels) for column, name, doc in RATIOS}
    slo_burn = GaugeMetricFamily("jobfence_window_slo_burn_rate", "latency SLO burn rate: "
                                 "(1 - slo_attainment) / (1 - slo_target)", labels=labels)
    success_burn = GaugeMetricFamily("jobfence_window_success_burn_rate", "success SLO burn "
                                     "rate: (1 - success_ratio) / (1 - slo_success_target)",
                                     labels=labels)
    for window, rows in sorted(by_window.items()):
        label = window_label(window)
        actual = next((_number(r.get("window_seconds")) for r in rows
                       if _number(r.get("window_seconds")) is not None), None)
        seconds.add_metric([label], actual if actual is not None else window)
        for row in rows:
            key = [str(row["kind"]), str(row.get("queue") or ""), label]
            for name, _doc in WINDOW_COUNTS:
                counts[name].add_metric(key, _number(row.get(name)) or 0.0)
            for column, bucket in RETRY_BUCKETS:
                retries.add_metric(key + [bucket], _number(row.get(column)) or 0.0)
            for name, _doc in DURATIONS:
                for suffix, quantile in QUANTILES:
                    value = _number(row.get(f"{name}_{suffix}"))
                    if value is not None:
                        durations[name].add_metric(key + [quantile], value)
            # NULL means nothing to divide by: no sample, rather than a made-up 0 or 1.
            for column, _name, _doc in RATIOS:
                value = _number(row.get(column))
                if value is not None:
                    ratios[column].add_metric(key, value)
            for family, share, target in ((slo_burn, "slo_attainment", "slo_target"),
                                          (success_burn, "success_rate", "slo_success_target")):
                value = burn_rate(row.get(share), row.get(target))
                if value is not None:
                    family.add_metric(key, value)
    yield seconds
    yield from counts.values()
    yield retries
    yield from durations.values()
    yield from ratios.values()
    yield slo_burn
    yield success_burn


def bound_families(rows: Sequence[dict]) -> Iterator:
    """The kinds' bounds as jobs.metrics states them (a NULL run_time_budget is already
    half the timeout there: one rule, in SQL)."""
    families = {column: GaugeMetricFamily(f"jobfence_kind_{name}", doc,
                                          labels=["kind", "queue"])
                for column, name, doc in BOUNDS}
    for row in rows:
        key = [str(row["kind"]), str(row.get("queue") or "")]
        for column, _name, _doc in BOUNDS:
            value = _number(row.get(column))
            if value is not None:
                families[column].add_metric(key, value)
    yield from families.values()


def registry_for(db, *, window: float = DEFAULT_WINDOW,
                 burn_windows: Iterable[float] = DEFAULT_BURN_WINDOWS
                 ) -> tuple[CollectorRegistry, JobfenceCollector]:
    """A registry of its own: the exporter serves the database's numbers only, not this
    process's garbage-collector statistics."""
    registry = CollectorRegistry()
    collector = JobfenceCollector(db, window=window, burn_windows=burn_windows)
    registry.register(collector)
    return registry, collector
