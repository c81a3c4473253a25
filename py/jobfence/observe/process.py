"""Metrics of one jobfence process (worker, reaper, relay), served with ``--metrics-port``.

The database's numbers (depth, SLOs) come from ``jobfence metrics``; these say how each
process is doing: how long handlers run, what is in flight, how often leases are lost,
how often PostgreSQL or Redis went away and came back.

Cheap on the hot path by construction. The worker's counters already exist as plain ints
(the ``worker_stats`` log line reads them too); ``WorkerCollector`` reads them at scrape
time, so claiming and reporting pay nothing for being measured. What is recorded as it
happens is one histogram observation per job (its run time), and counter increments per
batch or per failure.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Mapping

from prometheus_client import REGISTRY, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

logger = logging.getLogger("jobfence.metrics")

# From a quick handler (a few ms: a cache write) to one that uses most of a long timeout.
PROCESSING_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
                      5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0)

PROCESSING = Histogram(
    "jobfence_worker_processing_seconds",
    "handler run time per job, from the handler's start to its return (or its failure)",
    ["kind"], buckets=PROCESSING_BUCKETS, registry=None)
REPORTS_REJECTED = Counter(
    "jobfence_worker_reports_rejected",
    "complete_many/fail_many items PostgreSQL did not accept because the lease was lost (JB001)",
    registry=None)
CONNECTION_ERRORS = Counter(
    "jobfence_connection_errors",
    "calls that failed because PostgreSQL or Redis could not be reached", ["server"],
    registry=None)
RECONNECTS = Counter(
    "jobfence_reconnects",
    "times this process reached a server again after failing to", ["server"], registry=None)
REAPER_TICKS = Counter("jobfence_reaper_ticks", "reaper ticks that ran to the end",
                       registry=None)
REAPER_TICK_ERRORS = Counter(
    "jobfence_reaper_tick_errors", "reaper ticks cut short, by the reason logged", ["error"],
    registry=None)
REAPER_JOBS = Counter(
    "jobfence_reaper_jobs",
    "jobs the reaper repaired, by action: reaped (expired leases), recovered "
    "(enqueue_failed pushed again), moved (due ids from the delayed sets), stale_repushed, "
    "pruned (finished jobs deleted by retention)",
    ["action"], registry=None)
REAPER_LAST_TICK = Gauge(
    "jobfence_reaper_last_tick_timestamp_seconds", "Unix time of the last completed tick",
    registry=None)
DEAD_LETTERS = Counter(
    "jobfence_reaper_dead_letters",
    "dead-letter page deliveries the reaper's webhook forwarder attempted, by outcome: "
    "forwarded (a 2xx), failed (retried with backoff; a page is never dropped)", ["outcome"],
    registry=None)
UNCLAIMED = Counter(
    "jobfence_worker_unclaimed_ids",
    "popped ids a claim did not grant, by cause: not_claimable (a duplicate signal, a job "
    "done or running), unknown (no such job: another deployment on this Redis database?), "
    "other_queue (another queue's job pushed into this worker's lists), passed_over (claimable "
    "but not granted: held back by a limit, locked by another claim, or not chosen by a fair "
    "claim; its signal is given back or pushed again)", ["cause"],
    registry=None)
RELAY_PUSHED = Counter("jobfence_relay_pushed", "job ids the relay pushed to Redis",
                       registry=None)
RELAY_LISTENING = Gauge(
    "jobfence_relay_listening", "1 while the relay's LISTEN connection is up", registry=None)

# Recorded in every process (an increment is cheaper than asking whether anyone listens),
# served only by the role that owns them: a worker's page shows no reaper counters.
ROLE_METRICS = {
    "worker": (PROCESSING, REPORTS_REJECTED, UNCLAIMED),
    "reaper": (REAPER_TICKS, REAPER_TICK_ERRORS, REAPER_JOBS, REAPER_LAST_TICK, DEAD_LETTERS),
    "relay": (RELAY_PUSHED, RELAY_LISTENING),
}
COMMON_METRICS = (CONNECTION_ERRORS, RECONNECTS)

# Every label value exists from the start, so rate() and increase() see the first one.
REAPER_ACTIONS = ("reaped", "recovered", "moved", "stale_repushed", "pruned")
for _action in REAPER_ACTIONS:
    REAPER_JOBS.labels(_action)
for _error in ("db_unavailable", "redis_unavailable", "tick_failed"):
    REAPER_TICK_ERRORS.labels(_error)
for _cause in ("not_claimable", "unknown", "other_queue", "passed_over"):
    UNCLAIMED.labels(_cause)
for _outcome in ("forwarded", "failed"):
    DEAD_LETTERS.labels(_outcome)

_processing: dict[str, Any] = {}
_processing_lock = threading.Lock()


def job_ran(kind: str, seconds: float) -> None:
    """One job's handler run time (called once per job, from the handler's thread)."""
    child = _processing.get(kind)
    if child is None:
        with _processing_lock:
            child = _processing.get(kind) or PROCESSING.labels(kind)
            _processing[kind] = child
    child.observe(seconds)


class Link:
    """The state of one server as this process sees it: ``failed()`` where a call could not
    reach it, ``ok()`` where one did. A success after failures counts one reconnect; a
    success while nothing failed costs one attribute read."""

    __slots__ = ("down", "_errors", "_reconnects", "_lock")

    def __init__(self, server: str):
        self.down = False
        self._errors = CONNECTION_ERRORS.labels(server)
        self._reconnects = RECONNECTS.labels(server)
        self._lock = threading.Lock()

    def failed(self) -> None:
        self.down = True
        self._errors.inc()

    def ok(self) -> None:
        if self.down:
            with self._lock:
                if self.down:
                    self.down = False
                    self._reconnects.inc()


POSTGRES = Link("postgresql")
REDIS = Link("redis")


def reaper_ticked(counts: Mapping[str, int]) -> None:
    REAPER_TICKS.inc()
    for action, n in counts.items():
        if n:
            REAPER_JOBS.labels(action).inc(n)
    REAPER_LAST_TICK.set(time.time())


def reaper_tick_failed(error: str) -> None:
    REAPER_TICK_ERRORS.labels(error).inc()


def dead_letters(outcome: str, n: int) -> None:
    DEAD_LETTERS.labels(outcome).inc(n)


def relay_pushed(n: int) -> None:
    RELAY_PUSHED.inc(n)


def relay_listening(up: bool) -> None:
    RELAY_LISTENING.set(1 if up else 0)


class WorkerCollector:
    """The worker's own counters, read when Prometheus asks (nothing on the hot path)."""

    def __init__(self, worker):
        self.w = worker

    def describe(self):
        # Nothing to announce: the default registry would otherwise collect at registration.
        return []

    def collect(self):
        try:
            yield from self._families()
        except Exception:  # noqa: BLE001 - a scrape must never take the worker down
            logger.warning("could not read the worker's counters for a scrape", exc_info=True,
                           extra={"event": "metrics_collect_failed", "fields": {}})

    def _families(self):
        w = self.w
        claimer, reporter, keeper = w.claimer, w.reporter, w.keeper
        info = GaugeMetricFamily("jobfence_worker_info", "1, labelled with the worker's name",
                                 labels=["worker"])
        info.add_metric([w.name], 1.0)
        yield info
        yield _counter("jobfence_worker_jobs_claimed", "jobs claimed (leases granted)",
                       claimer.claimed)
        reported = CounterMetricFamily("jobfence_worker_jobs_reported", "outcomes PostgreSQL "
                                       "accepted: completed, retried or failed (for good)",
                                       labels=["outcome"])
        for outcome in ("completed", "retried", "failed"):
            reported.add_metric([outcome], float(reporter.stats[outcome]))
        yield reported
        yield _counter("jobfence_worker_lease_lost", "jobs whose lease was lost (JB001 at a "
                       "heartbeat or a report): their result was discarded",
                       reporter.stats["lost"])
        beats = keeper.stats if keeper is not None else {}
        yield _counter("jobfence_worker_heartbeats", "heartbeat_many statements sent",
                       beats.get("beats", 0))
        yield _counter("jobfence_worker_heartbeat_failures",
                       "heartbeat_many statements that failed (timed out, server away)",
                       beats.get("beat_failures", 0))
        yield _counter("jobfence_worker_timeouts", "jobs failed at their timeout",
                       beats.get("timeouts", 0))
        yield _gauge("jobfence_worker_last_loop_timestamp_seconds",
                     "Unix time the claim loop last went round (a pop, a claim, a wait for a "
                     "free slot: at least every few seconds); stale while it is stuck",
                     claimer.looped_at)
        yield _gauge("jobfence_worker_jobs_in_flight",
                     "jobs claimed whose handler has not returned (waiting or running)",
                     claimer.active())
        yield _gauge("jobfence_worker_jobs_held", "leases held (in flight or being reported)",
                     len(w.held))
        yield _gauge("jobfence_worker_concurrency", "handler slots (--concurrency)",
                     w.concurrency)
        yield _gauge("jobfence_worker_hung_handlers",
                     "sync handler threads still running past their job's timeout",
                     w.threads.hung)


def _counter(name: str, doc: str, value: float) -> CounterMetricFamily:
    family = CounterMetricFamily(name, doc)
    family.add_metric([], float(value))
    return family


def _gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
    family = GaugeMetricFamily(name, doc)
    family.add_metric([], float(value))
    return family


def watch_worker(worker, registry=REGISTRY) -> WorkerCollector:
    collector = WorkerCollector(worker)
    registry.register(collector)
    return collector


def enable(role: str, registry=REGISTRY) -> None:
    """Serve the metrics of ``role`` (worker, reaper, relay) from ``registry``, beside the
    client's own process_* and python_* ones."""
    try:
        from prometheus_client import disable_created_metrics
    except ImportError:  # older client: the *_created samples stay, harmless
        pass
    else:
        # *_created would double every counter's series for a start time Prometheus
        # already has (process_start_time_seconds).
        disable_created_metrics()
    for metric in COMMON_METRICS + ROLE_METRICS[role]:
        registry.register(metric)
