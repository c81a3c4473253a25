"""OpenTelemetry tracing end to end (docs/observability.md, "Tracing"): a producer's span
context travels with the job through PostgreSQL, and a real `jobfence worker` whose app sets
a tracer provider runs each attempt in a span linked to it. The producer's spans go to the
SDK's in-memory exporter; the worker's to the SDK's console exporter, one JSON object per
line in a file the test reads."""

from __future__ import annotations

import json
import signal
import textwrap

import psycopg
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from api_helpers import start_api
from conftest import wait_until

TRACED_APP = textwrap.dedent('''
    """The example app, with a tracer provider exporting to a file: what a user's app module
    does with its own exporter."""
    import os
    import threading

    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor

    from jobfence.examples import app

    _out = open(os.environ["TRACE_FILE"], "a", buffering=1)
    _provider = TracerProvider()
    _provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter(
        out=_out, formatter=lambda span: span.to_json(indent=None) + "\\n")))
    trace.set_tracer_provider(_provider)
    tracer = trace.get_tracer("traced_app")


    @app.task("traced.child_span")
    def child_span(job_id, payload, ctx):
        with tracer.start_as_current_span("inside the handler"):
            return {"ok": True}


    @app.task("traced.hang")
    def hang(job_id, payload, ctx):
        # Deaf to its cancel: a handler that never returns.
        threading.Event().wait()
''')


@pytest.fixture
def producer():
    exporter = InMemorySpanExporter()
    provider = TracerProvider()  # not the global one: other tests in this process see none
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider.get_tracer("test-producer"), exporter
    provider.shutdown()


@pytest.fixture
def traced_worker(procs, tmp_path, client):
    (tmp_path / "traced_app.py").write_text(TRACED_APP)
    trace_file = tmp_path / "spans.jsonl"
    trace_file.touch()
    client.db.define_type("traced.child_span")
    env = {"PYTHONPATH": str(tmp_path), "TRACE_FILE": str(trace_file)}

    def start(*extra):
        p = procs.start("traced", "worker", "--app", "traced_app:app", "--name", "traced",
                        "--pop-timeout", "0.2", "--no-declare", *extra, env=env)
        p.wait_for("worker_ready")
        return p

    def spans():
        return [json.loads(line) for line in trace_file.read_text().splitlines() if line.strip()]

    return start, spans


def _hex(value: int, width: int) -> str:
    return f"0x{value:0{width}x}"


def test_each_attempt_runs_in_a_span_linked_to_the_producers(producer, traced_worker, client, conn):
    tracer, exporter = producer
    start, spans = traced_worker
    with tracer.start_as_current_span("checkout") as checkout:
        ok = client.submit("noop", {"n": 1})
        (flaky,) = client.submit_many([{"kind": "flaky", "payload": {"fail_times": 1}}])
        nested = client.submit("traced.child_span")
    untraced = client.submit("noop", {"n": 2})
    producer_ctx = checkout.get_span_context()
    stored = dict(conn.execute("SELECT id, traceparent FROM jobs.job WHERE id = ANY (%s)",
                               ([ok, flaky, nested, untraced],)).fetchall())
    expected = f"00-{producer_ctx.trace_id:032x}-{producer_ctx.span_id:016x}-{int(producer_ctx.trace_flags):02x}"
    assert stored == {ok: expected, flaky: expected, nested: expected, untraced: None}
    assert [s.name for s in exporter.get_finished_spans()] == ["checkout"]

    start()
    for job_id in (ok, flaky, nested, untraced):
        assert client.wait(job_id, timeout=30).status == "done"
    wait_until(lambda: len([s for s in spans() if s["name"].startswith("process ")]) >= 5, 15,
               what="five attempt spans exported")
    attempts = [s for s in spans() if s["name"].startswith("process ")]
    by_job: dict[int, list[dict]] = {}
    for s in attempts:
        by_job.setdefault(s["attributes"]["jobfence.job.id"], []).append(s)
    assert sorted(len(v) for v in by_job.values()) == [1, 1, 1, 2], by_job.keys()

    for job_id in (ok, flaky, nested):
        for s in by_job[job_id]:
            assert [(link["context"]["trace_id"], link["context"]["span_id"]) for link in s["links"]] == \
                [(_hex(producer_ctx.trace_id, 32), _hex(producer_ctx.span_id, 16))], s
            assert s["kind"] == "SpanKind.CONSUMER"
            assert s["context"]["trace_id"] != _hex(producer_ctx.trace_id, 32)  # a trace of its own
    assert by_job[untraced][0]["links"] == []

    first, second = sorted(by_job[flaky], key=lambda s: s["attributes"]["jobfence.job.attempt"])
    # The retry moved the lease on (2), the second claim again (3).
    for s, attempt, version in ((first, 1, 1), (second, 2, 3)):
        a = s["attributes"]
        assert (a["jobfence.job.kind"], a["messaging.destination.name"], a["jobfence.job.attempt"],
                a["jobfence.job.lease_version"], a["jobfence.worker"]) == ("flaky", "default", attempt, version, "traced")
    assert first["status"]["status_code"] == "ERROR" and first["attributes"]["jobfence.job.retryable"] is True
    assert [e["name"] for e in first["events"]] == ["exception", "retry requested"]
    assert second["status"]["status_code"] == "OK"

    (inner,) = [s for s in spans() if s["name"] == "inside the handler"]
    assert inner["parent_id"] == by_job[nested][0]["context"]["span_id"], "the handler's span is a child of its attempt's"


def test_http_api_stores_the_traceparent_header(procs, declared):
    api = start_api(procs)
    header = {"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
    one = api.post("/jobs", {"kind": "noop"}, headers=header)
    batch = api.post("/jobs/batch", {"jobs": [{"kind": "noop"}, {"kind": "noop"}]}, headers=header)
    assert one.status == 202 and batch.status == 202, (one.raw, batch.raw)
    ids = [one.data["id"]] + [j["id"] for j in batch.data["jobs"]]
    with psycopg.connect(declared) as c:
        got = {r[0] for r in c.execute("SELECT traceparent FROM jobs.job WHERE id = ANY (%s)", (ids,))}
    assert got == {header["traceparent"]}
    # A malformed trace context is ignored (W3C Trace Context), not refused: the job is
    # submitted without one.
    for garbage in ("garbage", "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                    "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
                    "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01"):
        bad = api.post("/jobs", {"kind": "noop"}, headers={"traceparent": garbage})
        assert bad.status == 202, bad.raw
        with psycopg.connect(declared) as c:
            stored = c.execute("SELECT traceparent FROM jobs.job WHERE id = %s", (bad.data["id"],)).fetchone()[0]
        assert stored is None, garbage


def test_spans_end_at_a_timeout_and_at_the_hand_back_of_a_stopping_worker(traced_worker, client):
    """A handler that never returns must not keep its span open: the timeout's report ends
    it, and a job still running when the worker stops ends with the hand-back."""
    start, spans = traced_worker
    client.db.define_type("traced.hang", timeout=1, max_retries=0)
    timed_out = client.submit("traced.hang")
    worker = start("--concurrency", "2", "--grace", "0.5")
    assert client.wait(timed_out, timeout=30).status == "failed"

    def span_of(job_id):
        return [s for s in spans() if s["attributes"].get("jobfence.job.id") == job_id]

    wait_until(lambda: span_of(timed_out), 15, what="the timed-out attempt's span exported")
    (span,) = span_of(timed_out)
    assert span["status"] == {"status_code": "ERROR", "description": "timeout"}

    client.db.define_type("traced.hang", timeout=3600)
    running = client.submit("traced.hang")
    wait_until(lambda: client.get(running).status == "processing", 15, what="the second job running")
    worker.signal(signal.SIGTERM)
    worker.wait(30)
    (span,) = span_of(running)
    assert span["status"] == {"status_code": "ERROR", "description": "worker shutdown"}
    assert span["attributes"]["jobfence.job.retryable"] is True
