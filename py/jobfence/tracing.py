"""OpenTelemetry tracing (docs/observability.md, "Tracing"), optional: ``pip install
jobfence[otel]``.

A producer's current span context is stored with the job as its W3C ``traceparent``
(``jobs.job.traceparent``, so a job submitted from any language carries it). A worker whose
process has a tracer provider runs each attempt in a span of its own, linked to that
context: a job may wait for hours and be retried many times, so its attempts are linked
traces of their own rather than children of a request long finished. Without the package,
or without a provider, nothing here costs more than a check at start.
"""

from __future__ import annotations

import contextlib
import os
import re
from typing import Any, Iterator, Sequence

try:
    from opentelemetry import trace
    from opentelemetry.trace import Link, SpanKind, Status, StatusCode
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
except ImportError:  # the [otel] extra is not installed
    trace = None

_W3C = TraceContextTextMapPropagator() if trace is not None else None


def current_traceparent() -> str | None:
    """The W3C traceparent of the caller's current span, or None (no span, or no
    OpenTelemetry)."""
    if trace is None or not trace.get_current_span().get_span_context().is_valid:
        return None
    carrier: dict[str, str] = {}
    _W3C.inject(carrier)
    return carrier.get("traceparent")


_TRACEPARENT = re.compile(r"[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}")


def valid_traceparent(header: str | None) -> str | None:
    """The header if it is a W3C traceparent that jobs.submit takes (its rule: version 00's
    layout, a version other than ff, neither id all zeros), else None. A receiver ignores a
    malformed trace context rather than refusing the request (W3C Trace Context, 3.2)."""
    if header is None:
        return None
    header = header.strip()
    if (_TRACEPARENT.fullmatch(header) is None or header.startswith("ff")
            or header[3:35] == "0" * 32 or header[36:52] == "0" * 16):
        return None
    return header


def _linked(traceparent: str | None) -> list:
    if not traceparent:
        return []
    context = trace.get_current_span(_W3C.extract({"traceparent": traceparent})).get_span_context()
    return [Link(context)] if context.is_valid else []


def worker_tracer(worker: str) -> "AttemptSpans | None":
    """The worker's attempt spans, or None: no OpenTelemetry, no tracer provider set (the
    API's default proxy records nothing), or ``JOBFENCE_TRACING=off``."""
    if trace is None or os.environ.get("JOBFENCE_TRACING", "on").lower() in ("off", "0", "false"):
        return None
    if isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        return None
    from . import __version__

    return AttemptSpans(trace.get_tracer("jobfence.worker", __version__), worker)


class AttemptSpans:
    """One span per attempt: from its claim to its reported outcome."""

    def __init__(self, tracer: Any, worker: str):
        self.tracer = tracer
        self.worker = worker

    def begin(self, jobs: Sequence[Any], contexts: dict[int, str]) -> None:
        """Start the spans of a claimed batch; ``contexts``: job id -> traceparent
        (``jobs.trace_contexts``, one call per batch)."""
        for job in jobs:
            lease = job.lease
            job.span = self.tracer.start_span(
                f"process {lease.kind}", kind=SpanKind.CONSUMER,
                links=_linked(contexts.get(lease.job_id)),
                attributes={"messaging.system": "jobfence",
                            "messaging.operation.type": "process",
                            "messaging.destination.name": lease.queue,
                            "jobfence.job.kind": lease.kind,
                            "jobfence.job.id": lease.job_id,
                            "jobfence.job.attempt": lease.attempt,
                            "jobfence.job.lease_version": lease.lease_version,
                            "jobfence.worker": self.worker})


@contextlib.contextmanager
def running(job: Any) -> Iterator[None]:
    """The attempt's span as the current one while its handler runs, so the handler's own
    spans are its children."""
    with trace.use_span(job.span, end_on_exit=False, record_exception=False,
                        set_status_on_exception=False):
        yield


def succeeded(job: Any) -> None:
    span, job.span = job.span, None
    span.set_status(Status(StatusCode.OK))
    span.end()


def failed(job: Any, error: str, retryable: bool, exc: BaseException | None = None) -> None:
    """The handler failed: whether the job is tried again is the database's call (its retry
    budget), so the span says whether the failure asked for one."""
    span, job.span = job.span, None
    if span is None:
        return
    if exc is not None:
        span.record_exception(exc)
    span.set_attribute("jobfence.job.retryable", retryable)
    span.add_event("retry requested" if retryable else "failure final", {"jobfence.error": error})
    span.set_status(Status(StatusCode.ERROR, error))
    span.end()


def snoozed(job: Any, seconds: float) -> None:
    span, job.span = job.span, None
    span.add_event("snoozed", {"jobfence.snooze.seconds": seconds})
    span.end()


def dropped(job: Any) -> None:
    """No outcome of the handler's is reported: the lease timed out, was lost or handed
    back first (that report says which)."""
    span, job.span = job.span, None
    if span is None:  # ended meanwhile by the thread that reported the job (timeout, stop)
        return
    span.add_event("outcome discarded")
    span.set_status(Status(StatusCode.ERROR, "the lease ended before the handler's outcome"))
    span.end()
