"""``GET /metrics``: the API's own request figures plus the SQL numbers of the exporter.

The SQL part is ``observe.exporter.JobfenceCollector``, the same collector as ``jobfence
metrics``, reading PostgreSQL afresh at each scrape through a small pool of its own (on a
thread: the collector is synchronous)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

# Requests are mostly milliseconds; long polls last up to 60 s.
BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
           60.0)


class ApiMetrics:
    def __init__(self):
        try:
            from prometheus_client import disable_created_metrics
        except ImportError:  # older client: the *_created samples stay, harmless
            pass
        else:
            # As the processes' metrics: no *_created twin for every counter series.
            disable_created_metrics()
        self.registry = CollectorRegistry()
        self.requests = Counter("jobfence_api_requests", "HTTP requests answered",
                                ["method", "route", "status"], registry=self.registry)
        self.duration = Histogram("jobfence_api_request_duration_seconds",
                                  "time to answer an HTTP request (long polls included)",
                                  ["method", "route"], buckets=BUCKETS, registry=self.registry)
        self.waiting = Gauge("jobfence_api_long_polls", "requests waiting in ?wait= right now",
                             registry=self.registry)
        self.not_enqueued = Counter("jobfence_api_enqueue_failed",
                                    "jobs committed whose push to Redis failed (parked as "
                                    "enqueue_failed for the reaper)", registry=self.registry)

    def observe(self, method: str, route: str, status: int, seconds: float) -> None:
        self.requests.labels(method, route, str(status)).inc()
        self.duration.labels(method, route).observe(seconds)

    def text(self, sql_registry=None) -> bytes:
        own = generate_latest(self.registry)
        return own if sql_registry is None else own + generate_latest(sql_registry)
