"""Two deployments on one Redis database (docs/design.md §6): each database has its own
namespace (jobs.redis_namespace(), random at deploy), so each one's workers pop only its own
ids — none of the other's, no stale re-push needed, no unknown ids."""

from __future__ import annotations

import subprocess
import uuid

import psycopg
import pytest
import redis as redis_lib

from jobfence import Client
from jobfence.db import Database

from conftest import ADMIN_URL, E2E_TYPE_OPTIONS, REPO, _server_url, sqitch_target, wait_until


@pytest.fixture
def two_deployments():
    names = [f"jobfence_ns_{uuid.uuid4().hex[:8]}" for _ in range(2)]
    urls = [f"{_server_url(ADMIN_URL)}/{n}" for n in names]
    try:
        for name, url in zip(names, urls):
            with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
                admin.execute(f'CREATE DATABASE "{name}"')
            deployed = subprocess.run(["sqitch", "--quiet", "deploy", sqitch_target(url)], cwd=REPO,
                                      capture_output=True, text=True, timeout=300)
            assert deployed.returncode == 0, deployed.stdout + deployed.stderr
            db = Database(url, max_size=1)
            try:
                db.define_type("noop", **E2E_TYPE_OPTIONS)
            finally:
                db.close()
        yield urls
    finally:
        with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
            for name in names:
                admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_two_deployments_on_one_redis_database_keep_to_their_own_jobs(procs, two_deployments, redis_url):
    namespaces = []
    for url in two_deployments:
        with psycopg.connect(url, autocommit=True) as c:
            namespaces.append(c.execute("SELECT jobs.redis_namespace()").fetchone()[0])
    assert namespaces[0] != namespaces[1] and all(n.startswith("jobfence-") for n in namespaces)

    workers = [procs.start(f"w{i}", "worker", "--app", "jobfence.examples:app",
                           "--name", f"deployment-{i}", "--pop-timeout", "0.2",
                           env={"JOBFENCE_DATABASE_URL": url, "JOBFENCE_LOG_LEVEL": "INFO"})
               for i, url in enumerate(two_deployments)]
    for w in workers:
        w.wait_for("worker_ready", timeout=30)
    ids = []
    for url in two_deployments:
        with Client(url, redis_url) as client:
            ids.append(client.submit_many([{"kind": "noop", "payload": {"n": n}} for n in range(300)]))
    # No reaper runs: a job whose id another deployment's worker popped would never be done.
    for i, url in enumerate(two_deployments):
        with psycopg.connect(url, autocommit=True) as c:
            def owners():
                return c.execute("SELECT status::text, owned_by, count(*) FROM jobs.job "
                                 "GROUP BY 1, 2").fetchall()
            wait_until(lambda: owners() == [("done", f"deployment-{i}", 300)], 60,
                       what=f"deployment {i}'s jobs done by its own worker: {owners()}")
    for w in workers:
        assert not w.find("unclaimed_unknown"), w.tail()
    r = redis_lib.Redis.from_url(redis_url)
    try:
        keys = {k.decode() for k in r.scan_iter(match="jobfence-*")}
    finally:
        r.close()
    assert {k.split(":", 1)[0] for k in keys} <= set(namespaces), keys
