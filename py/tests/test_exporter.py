"""The Prometheus side: `jobfence metrics` (the database's numbers) and the --metrics-port of
worker, reaper and relay, scraped over HTTP from real processes on real servers."""

from __future__ import annotations

import json
import math
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from datetime import datetime, timedelta, timezone
from decimal import Decimal

import psycopg
import pytest
from prometheus_client.parser import text_string_to_metric_families

from conftest import ADMIN_URL, E2E_TYPE_OPTIONS, REPO, _free_port, wait_until

DOCS = REPO / "docs" / "observability.md"
DASHBOARD = REPO / "deploy" / "grafana" / "jobfence.json"
ALERTS = REPO / "deploy" / "prometheus" / "alerts.yml"
ALERTS_TEST = REPO / "deploy" / "prometheus" / "alerts_test.yml"

EXPORTER_PREFIXES = ("jobfence_up", "jobfence_exporter_", "jobfence_queue_", "jobfence_window_",
                     "jobfence_kind_")
HISTOGRAM_SUFFIXES = ("_bucket", "_count", "_sum")


# -- scraping ---------------------------------------------------------------------------------
class Scrape:
    """One scrape: sample values by name and labels, and the metric names it exposed
    (counters with their _total, histograms by their base name)."""

    def __init__(self, text: str):
        self.text = text
        self.samples: list[tuple[str, dict, float]] = []
        self.names: set[str] = set()
        for family in text_string_to_metric_families(text):
            self.names.add(family.name + "_total" if family.type == "counter" else family.name)
            for s in family.samples:
                self.samples.append((s.name, s.labels, s.value))

    def find(self, name: str, **labels) -> list[float]:
        return [v for n, lab, v in self.samples
                if n == name and all(lab.get(k) == str(x) for k, x in labels.items())]

    def one(self, name: str, **labels) -> float:
        found = self.find(name, **labels)
        assert len(found) == 1, f"{name}{labels}: {found}\n{self.text[:3000]}"
        return found[0]

    def jobfence_names(self) -> set[str]:
        return {n for n in self.names if n.startswith("jobfence_")}


def scrape(port: int) -> Scrape:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=15) as answer:
        assert answer.status == 200
        return Scrape(answer.read().decode())


def port_of(proc, event: str) -> int:
    return int(proc.wait_for(event)[0]["port"])


def start_exporter(procs, *extra, env=None):
    p = procs.start("exporter", "metrics", "--port", "0", *extra, env=env)
    return p, port_of(p, "exporter_ready")


def documented_names() -> set[str]:
    text = DOCS.read_text()
    section = text.split("## Exporter and process metrics", 1)
    assert len(section) == 2, "docs/observability.md has no 'Exporter and process metrics' section"
    return set(re.findall(r"`(jobfence_[a-z0-9_]+)`", section[1]))


def _terminal_count(url: str, ids: list[int]) -> int:
    with psycopg.connect(url, autocommit=True) as c:
        return c.execute("SELECT count(*) FROM jobs.job WHERE id = ANY(%s) "
                         "AND status IN ('done', 'failed')", (ids,)).fetchone()[0]


def _metrics_rows(url: str, since: str) -> dict[str, dict]:
    with psycopg.connect(url, autocommit=True) as c:
        cur = c.execute("SELECT * FROM jobs.metrics(%s::interval)", (since,))
        names = [d.name for d in cur.description]
        return {row[0]: dict(zip(names, row)) for row in cur.fetchall()}


# -- the exporter -----------------------------------------------------------------------------
def test_exporter_reports_a_known_workload(procs, client, declared):
    procs.worker("w1")
    noop = [client.submit("noop", {"n": i}) for i in range(5)]
    flaky_ok = [client.submit("flaky", {"fail_times": 1}) for _ in range(2)]
    flaky_dead = [client.submit("flaky", {"p": 1.0, "permanent": True})]
    later = datetime.now(timezone.utc) + timedelta(hours=1)
    for _ in range(3):
        client.submit("sleep", {"seconds": 0}, run_after=later)
    ran = noop + flaky_ok + flaky_dead
    wait_until(lambda: _terminal_count(declared, ran) == len(ran), 30, what="workload terminal")
    from jobfence.db import Database

    db = Database(declared, max_size=1, open_timeout=10)
    try:
        # Bounds set by an administrator reach the gauges the alert rules compare against.
        # (Decimal: the SQL takes these as numeric.)
        db.define_type("noop", **E2E_TYPE_OPTIONS, max_backlog=123, run_time_budget=7.5,
                       max_failure_rate=Decimal("0.25"), slo_target=Decimal("0.9"),
                       slo_success=Decimal("0.999"))
    finally:
        db.close()

    _exporter, port = start_exporter(procs)
    s = scrape(port)
    assert s.one("jobfence_up") == 1.0
    assert s.one("jobfence_exporter_scrape_errors_total") == 0.0

    for window in ("5m", "1h"):
        assert s.one("jobfence_window_submitted", kind="noop", window=window) == 5
        assert s.one("jobfence_window_started", kind="noop", window=window) == 5
        assert s.one("jobfence_window_succeeded", kind="noop", window=window) == 5
        assert s.one("jobfence_window_failed", kind="noop", window=window) == 0
        assert s.one("jobfence_window_ended_by_retries", kind="noop", window=window,
                     retries="0") == 5
    flaky = {name: s.one(f"jobfence_window_{name}", kind="flaky", window="5m")
             for name in ("submitted", "started", "succeeded", "failed", "retried", "reaped",
                          "cancelled", "dead_lettered")}
    assert flaky == {"submitted": 3, "started": 5, "succeeded": 2, "failed": 3, "retried": 2,
                     "reaped": 0, "cancelled": 0, "dead_lettered": 1}
    assert s.one("jobfence_window_failure_ratio", kind="flaky", window="5m") == pytest.approx(3 / 5)
    assert s.one("jobfence_window_success_ratio", kind="flaky", window="5m") == pytest.approx(2 / 3)
    assert s.one("jobfence_window_dead_letter_ratio", kind="flaky", window="5m") == pytest.approx(1 / 3)
    # (1 - 2/3) / (1 - 0.99): the success budget of the default slo_success burns 33x.
    assert s.one("jobfence_window_success_burn_rate", kind="flaky",
                 window="5m") == pytest.approx((1 - 2 / 3) / (1 - 0.99))
    assert s.one("jobfence_window_slo_attainment_ratio", kind="noop", window="5m") == 1.0
    assert s.one("jobfence_window_slo_burn_rate", kind="noop", window="5m") == 0.0
    assert s.one("jobfence_window_error_budget_remaining_ratio", kind="noop", window="5m") == 1.0

    # The retry distribution and the percentiles are the SQL's, sample for sample.
    rows = _metrics_rows(declared, "300 seconds")
    for kind in ("noop", "flaky"):
        for column, bucket in (("ended_after_0", "0"), ("ended_after_1", "1"),
                               ("ended_after_2", "2"), ("ended_after_3_plus", "3+")):
            assert s.one("jobfence_window_ended_by_retries", kind=kind, window="5m",
                         retries=bucket) == rows[kind][column]
        for which in ("wait", "run", "latency"):
            for suffix, quantile in (("p50", "0.5"), ("p95", "0.95"), ("p99", "0.99")):
                assert s.one(f"jobfence_window_{which}_seconds", kind=kind, window="5m",
                             quantile=quantile) == pytest.approx(rows[kind][f"{which}_{suffix}"])
    assert 0 < s.one("jobfence_window_latency_seconds", kind="noop", window="5m",
                     quantile="0.99") < 25
    # No job of the kind ended in the window: no percentile is made up.
    assert s.find("jobfence_window_run_seconds", kind="sleep", window="5m") == []
    assert s.find("jobfence_window_success_ratio", kind="sleep", window="5m") == []
    assert s.one("jobfence_window_submitted", kind="sleep", window="5m") == 3

    assert s.one("jobfence_queue_depth", queue="default", kind="sleep", state="delayed") == 3
    assert s.one("jobfence_queue_depth", queue="default", kind="sleep", state="ready") == 0
    # Delayed jobs are not due yet: not backlog (docs/observability.md, queue_depth).
    assert s.one("jobfence_queue_backlog", queue="default", kind="sleep") == 0
    assert s.one("jobfence_queue_depth", queue="default", kind="noop", state="processing") == 0
    assert s.one("jobfence_queue_oldest_ready_age_seconds", queue="default", kind="sleep") == 0

    assert s.one("jobfence_kind_max_backlog", kind="noop") == 123
    assert s.one("jobfence_kind_run_time_budget_seconds", kind="noop") == 7.5
    assert s.one("jobfence_kind_max_failure_ratio", kind="noop") == pytest.approx(0.25)
    assert s.one("jobfence_kind_slo_target_ratio", kind="noop") == pytest.approx(0.9)
    assert s.one("jobfence_kind_slo_success_target_ratio", kind="noop") == pytest.approx(0.999)
    # Without a run_time_budget half the kind's timeout is the bound: one a p95 can cross.
    assert s.one("jobfence_kind_run_time_budget_seconds", kind="flaky") == E2E_TYPE_OPTIONS["timeout"] / 2
    assert s.one("jobfence_kind_max_backlog", kind="flaky") == 10000
    assert s.one("jobfence_kind_slo_latency_seconds", kind="flaky") == 25

    labels = {lab["window"] for n, lab, _ in s.samples if n == "jobfence_window_seconds"}
    assert labels == {"5m", "30m", "1h", "6h"}
    assert 300 <= s.one("jobfence_window_seconds", window="5m") <= 360

    exposed = s.jobfence_names()
    documented = documented_names()
    assert exposed <= documented, f"undocumented: {sorted(exposed - documented)}"
    exporter_documented = {n for n in documented if n.startswith(EXPORTER_PREFIXES)}
    assert exporter_documented <= exposed, f"documented, not exposed: {sorted(exporter_documented - exposed)}"


def test_exporter_counts_follow_new_work_between_scrapes(procs, client, declared):
    procs.worker("w1")
    _exporter, port = start_exporter(procs, "--window", "120", "--burn-window", "3600")
    first = scrape(port)
    assert first.one("jobfence_window_succeeded", kind="noop", window="2m") == 0
    # --burn-window adds to the windows the alert rules need; it never takes them away.
    assert {lab["window"] for n, lab, _ in first.samples if n == "jobfence_window_seconds"} == \
        {"2m", "30m", "1h", "6h"}
    ids = client.submit_many([("noop", {"n": i}) for i in range(7)])
    wait_until(lambda: _terminal_count(declared, ids) == 7, 20, what="jobs done")
    # Nothing is cached between scrapes: the next one sees the new jobs.
    assert scrape(port).one("jobfence_window_succeeded", kind="noop", window="2m") == 7


def test_a_scrape_without_postgresql_answers_up_0_and_the_exporter_lives_on(procs):
    dead = f"postgresql://root@127.0.0.1:{_free_port()}/nowhere"
    exporter, port = start_exporter(procs, env={"JOBFENCE_DATABASE_URL": dead})
    for n in (1, 2):
        s = scrape(port)
        assert s.one("jobfence_up") == 0.0
        assert s.one("jobfence_exporter_scrape_errors_total") == n
        assert s.find("jobfence_queue_depth") == []
    assert exporter.alive()
    warnings = exporter.wait_for("scrape_failed")
    assert warnings[0]["level"] == "warning"
    assert "Traceback" not in exporter.tail(200)


def test_a_database_without_the_schema_answers_up_0(procs):
    # A server error (the jobs schema is missing), not a lost connection.
    exporter, port = start_exporter(procs, env={"JOBFENCE_DATABASE_URL": ADMIN_URL})
    s = scrape(port)
    assert s.one("jobfence_up") == 0.0
    line = exporter.wait_for("scrape_failed")[0]
    assert line["sqlstate"] == "42P01"
    assert exporter.alive() and "Traceback" not in exporter.tail(200)


def test_once_prints_a_scrape_and_its_exit_code_says_whether_postgresql_answered(declared):
    ok = subprocess.run([sys.executable, "-m", "jobfence", "--database-url", declared,
                         "metrics", "--once"],
                        cwd=REPO, capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0, ok.stderr
    assert Scrape(ok.stdout).one("jobfence_up") == 1.0
    dead = f"postgresql://root@127.0.0.1:{_free_port()}/nowhere"
    down = subprocess.run([sys.executable, "-m", "jobfence", "--database-url", dead,
                           "metrics", "--once"],
                          cwd=REPO, capture_output=True, text=True, timeout=60)
    assert down.returncode == 6
    assert Scrape(down.stdout).one("jobfence_up") == 0.0
    assert "Traceback" not in down.stderr


@pytest.mark.parametrize("command", [
    ["metrics", "--port"],
    ["worker", "--app", "jobfence.examples:app", "--metrics-port"],
    ["reaper", "--metrics-port"],
])
def test_a_port_in_use_is_a_one_line_error_with_exit_code_2(declared, redis_url, command):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run([sys.executable, "-m", "jobfence", "--database-url", declared,
                               "--redis-url", redis_url, *command, str(port)],
                              cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("Error:")]
    assert errors == [f"Error: cannot listen for metrics on 127.0.0.1:{port}: address already "
                      "in use (another process listens there)"], done.stderr
    assert "Traceback" not in done.stderr


# -- process metrics --------------------------------------------------------------------------
def test_worker_metrics_port_serves_process_metrics_that_move(procs, client):
    w = procs.worker("w1", "--metrics-port", "0", "--concurrency", "4")
    port = port_of(w, "metrics_listening")
    before = scrape(port)
    assert before.one("jobfence_worker_jobs_claimed_total") == 0
    assert before.one("jobfence_worker_info", worker="w1") == 1
    assert before.one("jobfence_worker_concurrency") == 4
    assert before.find("jobfence_worker_processing_seconds_count", kind="noop") == []
    # Only a worker's own metrics, beside the client's process ones.
    assert before.find("jobfence_reaper_ticks_total") == []
    assert before.find("process_cpu_seconds_total")

    quick = client.submit_many([("noop", {"n": i}) for i in range(10)])
    slow = client.submit("sleep", {"seconds": 0.3})
    wait_until(lambda: scrape(port).find("jobfence_worker_jobs_reported_total",
                                         outcome="completed") == [11.0],
               20, what="11 completions counted")
    after = scrape(port)
    assert after.one("jobfence_worker_jobs_claimed_total") == 11
    assert after.one("jobfence_worker_processing_seconds_count", kind="noop") == 10
    assert after.one("jobfence_worker_processing_seconds_count", kind="sleep") == 1
    assert 0.3 <= after.one("jobfence_worker_processing_seconds_sum", kind="sleep") < 5
    assert after.one("jobfence_worker_processing_seconds_bucket", kind="sleep", le="0.25") == 0
    assert after.one("jobfence_worker_processing_seconds_bucket", kind="sleep", le="0.5") == 1
    assert after.one("jobfence_worker_jobs_in_flight") == 0
    assert after.one("jobfence_worker_lease_lost_total") == 0
    assert after.one("jobfence_worker_reports_rejected_total") == 0
    assert after.one("jobfence_connection_errors_total", server="redis") == 0
    assert {client.get(i).status for i in quick + [slow]} == {"done"}

    exposed = after.jobfence_names()
    assert exposed <= documented_names(), f"undocumented: {sorted(exposed - documented_names())}"


def test_worker_counts_heartbeats_and_retries(procs, client):
    w = procs.worker("w1", "--metrics-port", "0")
    port = port_of(w, "metrics_listening")
    # A lease of 2 s is refreshed every ~0.7 s: a 2 s job needs a few heartbeats.
    long = client.submit("sleep", {"seconds": 2})
    flaky = client.submit("flaky", {"fail_times": 1})
    wait_until(lambda: scrape(port).find("jobfence_worker_jobs_reported_total",
                                         outcome="completed") == [2.0],
               30, what="both jobs completed")
    s = scrape(port)
    assert s.one("jobfence_worker_heartbeats_total") >= 2
    assert s.one("jobfence_worker_heartbeat_failures_total") == 0
    assert s.one("jobfence_worker_jobs_reported_total", outcome="retried") == 1
    assert s.one("jobfence_worker_processing_seconds_count", kind="flaky") == 2
    assert client.get(long).status == "done" and client.get(flaky).status == "done"


def test_a_redis_outage_counts_errors_and_one_reconnect(procs, declared, redis_server):
    procs.use_redis(redis_server.url)
    w = procs.worker("w1", "--metrics-port", "0")
    port = port_of(w, "metrics_listening")
    s = scrape(port)
    assert s.one("jobfence_connection_errors_total", server="redis") == 0
    assert s.one("jobfence_reconnects_total", server="redis") == 0
    redis_server.stop()
    wait_until(lambda: scrape(port).one("jobfence_connection_errors_total", server="redis") >= 2,
               30, what="failed pops counted")
    assert scrape(port).one("jobfence_reconnects_total", server="redis") == 0
    redis_server.start()
    wait_until(lambda: scrape(port).one("jobfence_reconnects_total", server="redis") == 1,
               30, what="the reconnect counted")
    from jobfence import Client

    with Client(declared, redis_server.url) as client:
        job_id = client.submit("noop", {})
        assert client.wait(job_id, timeout=20).status == "done"
    s = scrape(port)
    assert s.one("jobfence_reconnects_total", server="redis") == 1
    assert s.one("jobfence_reconnects_total", server="postgresql") == 0


def test_reaper_and_relay_metrics_ports(procs, client, declared):
    reaper = procs.reaper("--metrics-port", "0")
    relay = procs.start("relay", "relay", "--poll-interval", "0.5", "--metrics-port", "0")
    reaper_port = port_of(reaper, "metrics_listening")
    relay_port = port_of(relay, "metrics_listening")
    relay.wait_for("relay_listening")

    wait_until(lambda: scrape(reaper_port).one("jobfence_reaper_ticks_total") >= 2, 20,
               what="reaper ticks counted")
    r = scrape(reaper_port)
    assert abs(r.one("jobfence_reaper_last_tick_timestamp_seconds") - time.time()) < 60
    assert r.find("jobfence_relay_pushed_total") == []
    assert r.one("jobfence_reaper_tick_errors_total", error="db_unavailable") == 0

    # A lease nobody renews expires (2 s) and the reaper requeues the job.
    from jobfence.db import Database

    db = Database(declared, max_size=1, open_timeout=10)
    try:
        job = db.submit("noop", {})
        assert db.claim_many([job.id], "ghost")
    finally:
        db.close()
    wait_until(lambda: scrape(reaper_port).one("jobfence_reaper_jobs_total", action="reaped") >= 1,
               20, what="the expired lease reaped and counted")

    wait_until(lambda: scrape(relay_port).one("jobfence_relay_listening") == 1, 10,
               what="relay listening")
    pushed = scrape(relay_port).one("jobfence_relay_pushed_total")
    with psycopg.connect(declared, autocommit=True) as producer:
        producer.execute("SELECT jobs.submit('noop', '{}'::jsonb, notify => true)")
    wait_until(lambda: scrape(relay_port).one("jobfence_relay_pushed_total") >= pushed + 1, 10,
               what="the notified job pushed and counted")
    documented = documented_names()
    for port in (reaper_port, relay_port):
        exposed = scrape(port).jobfence_names()
        assert exposed <= documented, f"undocumented: {sorted(exposed - documented)}"


def test_run_passes_metrics_ports_to_its_children():
    from jobfence.runner import build_children

    children = build_children(app="jobfence.examples:app", workers=2, concurrency=4, batch=10,
                              log_format="json", log_level="INFO", reaper_interval=1.0,
                              stale_after=1.0, grace=5.0, queues=[], metrics_port=9300)
    ports = {c.name: c.argv[c.argv.index("--metrics-port") + 1] for c in children}
    assert ports == {"relay": "9300", "reaper": "9301", "worker-1": "9302", "worker-2": "9303"}
    plain = build_children(app="jobfence.examples:app", workers=1, concurrency=4, batch=10,
                           log_format="json", log_level="INFO", reaper_interval=1.0,
                           stale_after=1.0, grace=5.0, queues=[])
    assert not any("--metrics-port" in c.argv for c in plain)


# -- the dashboard and the alert rules --------------------------------------------------------
def _referenced(expr: str) -> set[str]:
    names = set()
    for name in re.findall(r"\b(jobfence_[a-z0-9_]+)", expr):
        for suffix in HISTOGRAM_SUFFIXES:
            if name.endswith(suffix) and name[:-len(suffix)] == "jobfence_worker_processing_seconds":
                name = name[:-len(suffix)]
        names.add(name)
    return names


def _exprs(node):
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "expr" and isinstance(value, str):
                yield value
            else:
                yield from _exprs(value)
    elif isinstance(node, list):
        for value in node:
            yield from _exprs(value)


def test_dashboard_queries_only_documented_metrics():
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = list(_exprs(dashboard))
    assert len(exprs) >= 30
    documented = documented_names()
    for expr in exprs:
        names = _referenced(expr)
        assert names, f"a query reads no jobfence metric: {expr}"
        assert names <= documented, f"{expr}: unknown {sorted(names - documented)}"
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    for panel in dashboard["panels"]:
        assert {"h", "w", "x", "y"} <= set(panel["gridPos"])
        assert panel["gridPos"]["x"] + panel["gridPos"]["w"] <= 24
    # The window variable offers exactly the exporter's default windows.
    window = next(v for v in dashboard["templating"]["list"] if v["name"] == "window")
    assert window["query"].split(",") == ["5m", "30m", "1h", "6h"]


def test_alert_rules_query_only_documented_metrics():
    text = ALERTS.read_text()
    exprs = re.findall(r"expr: \|\n((?:\s{10}.*\n)+)|expr: (.+)\n", text)
    flat = [a or b for a, b in exprs]
    assert len(flat) == 15
    documented = documented_names()
    for expr in flat:
        names = _referenced(expr)
        assert names and names <= documented, f"{expr}: unknown {sorted(names - documented)}"
    # Every alert has its runbook entry.
    runbook = (REPO / "docs" / "operations.md").read_text()
    for alert in re.findall(r"- alert: (\w+)", text):
        assert f"`{alert}`" in runbook, f"{alert} has no runbook entry in docs/operations.md"


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool not installed (scripts/setup)")
def test_alert_rules_pass_promtool():
    for args in (["check", "rules", str(ALERTS)], ["test", "rules", str(ALERTS_TEST)]):
        done = subprocess.run(["promtool", *args], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr


def test_burn_rate_and_window_labels():
    from jobfence.observe.exporter import burn_rate, window_label

    assert [window_label(s) for s in (60, 300, 1800, 3600, 21600, 86400, 90)] == \
        ["1m", "5m", "30m", "1h", "6h", "1d", "90s"]
    assert burn_rate(0.95, 0.95) == pytest.approx(1.0)
    assert burn_rate(1.0, 0.99) == 0.0
    assert burn_rate(None, 0.99) is None
    assert burn_rate(0.5, 1) is None  # a target of 1 allows no miss: no finite rate
    assert not math.isnan(burn_rate(0.0, 0.5))


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool not installed (scripts/setup)")
def test_a_kind_whose_p95_run_time_crosses_its_default_budget_fires_the_alert(
        procs, client, declared, tmp_path):
    """The default run_time_budget is half the timeout, a bound a p95 can cross (the timeout
    itself stops attempts). Jobs that run 1.3 s under a 2 s timeout cross it: the values the
    exporter scrapes, held for the rule's `for`, fire the shipped JobfenceRunTimeOverBudget."""
    import yaml

    from jobfence.db import Database

    procs.worker("w1")  # it declares its kinds: the 2 s timeout comes after
    db = Database(declared, max_size=1, open_timeout=10)
    try:
        db.define_type("sleep", **{**E2E_TYPE_OPTIONS, "timeout": 2.0})
    finally:
        db.close()
    ids = [client.submit("sleep", {"seconds": 1.3}) for _ in range(6)]
    wait_until(lambda: _terminal_count(declared, ids) == len(ids), 30, what="the slow jobs ended")
    _exporter, port = start_exporter(procs)
    s = scrape(port)
    budget = s.one("jobfence_kind_run_time_budget_seconds", kind="sleep")
    p95 = s.one("jobfence_window_run_seconds", kind="sleep", window="5m", quantile="0.95")
    assert budget == 1.0 and p95 > budget, (budget, p95)

    # The shipped rule, its annotations left out (promtool compares them verbatim).
    shipped = yaml.safe_load(ALERTS.read_text())
    rule = next(r for g in shipped["groups"] for r in g["rules"]
                if r.get("alert") == "JobfenceRunTimeOverBudget")
    rule = {k: v for k, v in rule.items() if k != "annotations"}
    rules = tmp_path / "rules.yml"
    rules.write_text(yaml.safe_dump({"groups": [{"name": "run time", "rules": [rule]}]}))
    labels = 'job="jobfence", instance="e", kind="sleep", queue="default"'
    cases = tmp_path / "cases.yml"
    cases.write_text(yaml.safe_dump({
        "rule_files": [str(rules)], "evaluation_interval": "1m",
        "tests": [{"interval": "1m", "input_series": [
            {"series": f'jobfence_window_run_seconds{{{labels}, window="5m", quantile="0.95"}}',
             "values": f"{p95!r}x10"},
            {"series": f"jobfence_kind_run_time_budget_seconds{{{labels}}}", "values": f"{budget!r}x10"}],
            "alert_rule_test": [
                {"eval_time": "4m", "alertname": "JobfenceRunTimeOverBudget", "exp_alerts": []},
                {"eval_time": "6m", "alertname": "JobfenceRunTimeOverBudget", "exp_alerts": [
                    {"exp_labels": {"severity": "warning", "job": "jobfence", "instance": "e",
                                    "kind": "sleep", "queue": "default"}}]}]}]}))
    done = subprocess.run(["promtool", "test", "rules", str(cases)], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
