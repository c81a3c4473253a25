"""Redis behind Sentinel (docs/scaling.md, "Redis Sentinel"): workers, the reaper, the relay
and producers reach the primary that a real Sentinel names; the core cases run while the
primary is killed and Sentinel promotes the replica, and every job still ends done —
signals Redis lost in the failover are rebuilt from PostgreSQL."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import psycopg
import pytest

import core_cases
from conftest import wait_until
from redis_topologies import SentinelSet


@pytest.fixture
def sentinel_set():
    workdir = Path(tempfile.mkdtemp(prefix="jobfence-sentinel-"))
    s = SentinelSet(workdir).start()
    try:
        yield s
    finally:
        s.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def test_core_cases_survive_a_sentinel_failover(sentinel_set, procs, declared):
    from jobfence import Client

    procs.use_redis(sentinel_set.url)
    during: list[int] = []
    with Client(declared, sentinel_set.url) as client:
        first = sentinel_set.primary()

        def failover():
            sentinel_set.kill_primary()
            # Submitted while no primary answers: parked as enqueue_failed, or pushed to the
            # new primary; either way PostgreSQL has them and the reaper signals them.
            during.extend(client.submit_many([{"kind": "noop", "payload": {"i": i}}
                                              for i in range(100)]))
            wait_until(lambda: sentinel_set.primary() not in (None, first), 30,
                       what="sentinel promoted the replica")

        core_cases.run(procs, client, sql_url=declared, audit_url=declared, batch=100,
                       before_workers=failover, what="every job done across the failover")
        after = client.submit_many([{"kind": "flaky", "payload": {"fail_times": 1}}] * 20)
        ids = during + after
        wait_until(lambda: client.status_counts(ids).get("done", 0) == len(ids), 60,
                   what="jobs submitted during and after the failover done")
    assert sentinel_set.primary() == sentinel_set.replica_port
    with psycopg.connect(declared, autocommit=True) as c:
        assert c.execute("SELECT count(*) FROM jobs.audit() WHERE violations > 0").fetchone()[0] == 0


def test_a_sentinel_url_without_a_service_is_a_usage_error(clean_db):
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "jobfence", "--database-url", clean_db,
                          "--redis-url", "redis+sentinel://127.0.0.1:26379", "worker",
                          "--app", "jobfence.examples:app"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "service name" in out.stderr, out.stderr
