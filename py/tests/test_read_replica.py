"""Observation from a hot standby (docs/scaling.md, "Observing from a replica"): with
--read-database-url naming a real streaming replica, `jobfence stats`, the exporter, the
API's /metrics and the dashboard's overview read there, so they keep answering with the
primary stopped — and without it they cannot."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import psycopg
import pytest

from api_helpers import start_api
from conftest import REPO, sqitch_target
from replica_helpers import BIN, ReplicatedPair

pytestmark = pytest.mark.skipif(not (BIN / "pg_basebackup").exists(),
                                reason="PostgreSQL server binaries are not installed")


@pytest.fixture
def pair():
    workdir = Path(tempfile.mkdtemp(prefix="jobfence-replica-"))
    p = ReplicatedPair(workdir).start()
    try:
        with psycopg.connect(p.url(p.primary_port), autocommit=True) as c:
            c.execute("CREATE DATABASE jobs")
        deployed = subprocess.run(["sqitch", "--quiet", "deploy", sqitch_target(p.url(p.primary_port, "jobs"))],
                                  cwd=REPO, capture_output=True, text=True, timeout=300)
        assert deployed.returncode == 0, deployed.stdout + deployed.stderr
        yield p
    finally:
        p.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def _jobfence(*args):
    return subprocess.run([sys.executable, "-m", "jobfence", *args], capture_output=True,
                          text=True, timeout=60)


def test_stats_and_exporter_read_the_standby(pair, procs):
    primary, standby = pair.url(pair.primary_port, "jobs"), pair.url(pair.standby_port, "jobs")
    with psycopg.connect(primary, autocommit=True) as c:
        c.execute("SELECT jobs.define_type('replica.kind', queue => 'reports')")
        c.execute("SELECT count(*) FROM jobs.submit_many(%s::jsonb)",
                  (json.dumps([{"kind": "replica.kind"}] * 7),))
    pair.wait_replayed("jobs")
    # The HTTP API starts on the primary, told to observe through the standby.
    procs.env.update(JOBFENCE_DATABASE_URL=primary, JOBFENCE_READ_DATABASE_URL=standby)
    api = start_api(procs, "--no-auth", tokens=None)
    # The primary stops: anything that still answers read the standby.
    subprocess.run(["runuser", "-u", "postgres", "--", str(BIN / "pg_ctl"), "-D",
                    str(pair.primary_dir), "-m", "fast", "-w", "stop"], capture_output=True, timeout=60)

    shown = _jobfence("--database-url", primary, "--read-database-url", standby, "stats", "--json")
    assert shown.returncode == 0, shown.stderr
    depth = json.loads(shown.stdout)["queue_depth"]
    assert [(r["queue"], r["kind"], r["queued_ready"]) for r in depth] == [("reports", "replica.kind", 7)]

    scraped = _jobfence("--database-url", primary, "--read-database-url", standby, "metrics", "--once")
    assert scraped.returncode == 0, scraped.stderr
    assert 'jobfence_up 1.0' in scraped.stdout

    overview = api.get("/ui", token=None)
    assert overview.status == 200 and b"replica.kind" in overview.raw, overview.raw[:300]
    scrape = api.get("/metrics", token=None)
    assert scrape.status == 200 and b"jobfence_up 1.0" in scrape.raw

    # Without the read URL the same commands need the (stopped) primary.
    assert _jobfence("--database-url", primary, "stats").returncode == 6
    assert _jobfence("--database-url", primary, "metrics", "--once").returncode == 6


def test_a_malformed_read_url_is_a_usage_error():
    out = _jobfence("--read-database-url", "postgresql://h:notaport/x", "stats")
    assert out.returncode == 2 and "invalid database URL" in out.stderr
