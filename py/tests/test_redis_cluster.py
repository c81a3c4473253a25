"""Redis Cluster (docs/scaling.md, "Redis Cluster"): a real three-node cluster started by
the test; a worker serving three queues whose keys live in different hash slots (on
different nodes), the reaper and producers on `redis+cluster://`; every multi-key command
stays in one queue's slot, the worker pops slot by slot and still blocks, and every job —
immediate, delayed, retried, prioritised — ends done. `jobfence api` on the cluster URL:
every route that pushes (a batch, a delayed job, a fan-out, a replay) reaches the worker."""

from __future__ import annotations

import shutil
import tempfile
import textwrap
from datetime import datetime, timedelta, timezone
from pathlib import Path

import psycopg
import pytest
import redis

import core_cases
from api_helpers import ADMIN_TOKEN, start_api
from conftest import wait_until
from redis_topologies import Cluster

QUEUES = ("alpha", "beta", "gamma")

APP = '''
from jobfence import App

app = App("cluster-test")
for q in {queues!r}:
    def handler(job_id, payload, ctx, q=q):
        if payload.get("fail_first") and ctx.attempt == 1:
            raise RuntimeError("first attempt fails")
        return {{"queue": q}}
    app.task("cl." + q, queue=q, lease_timeout=2.0, backoff_base=0.2, backoff_max=0.4)(handler)
'''


@pytest.fixture
def cluster():
    workdir = Path(tempfile.mkdtemp(prefix="jobfence-cluster-"))
    c = Cluster(workdir).start()
    try:
        yield c
    finally:
        c.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def test_queues_on_different_nodes_through_a_cluster(cluster, procs, clean_db, tmp_path):
    from jobfence import Client
    from jobfence.transport import ready_key

    probe = redis.RedisCluster(host="127.0.0.1", port=cluster.ports[0])
    nodes = {probe.get_node_from_key(ready_key(q)).port for q in QUEUES}
    assert len(nodes) > 1, "the queues' keys are spread over the cluster's nodes"
    probe.close()

    (tmp_path / "cluster_app.py").write_text(textwrap.dedent(APP.format(queues=QUEUES)))
    procs.use_redis(cluster.url)
    procs.reaper()
    w = procs.start("w1", "worker", "--app", "cluster_app:app", "--app-dir", str(tmp_path),
                    "--name", "w1", "--pop-timeout", "0.3", env={"JOBFENCE_LOG_LEVEL": "DEBUG"})
    w.wait_for("worker_ready")
    with Client(clean_db, cluster.url) as client:
        ids = []
        for q in QUEUES:
            ids += client.submit_many([{"kind": f"cl.{q}", "payload": {"i": i}} for i in range(50)])
            ids.append(client.submit(f"cl.{q}", {"fail_first": True}))
            ids.append(client.submit(f"cl.{q}", {"late": True},
                                     run_after=datetime.now(timezone.utc) + timedelta(seconds=1)))
        wait_until(lambda: client.status_counts(ids).get("done", 0) == len(ids), 60,
                   what="every job of every queue done through the cluster")
    assert not w.find("pop_failed") and not w.find("redis_unavailable"), w.tail()
    with psycopg.connect(clean_db, autocommit=True) as c:
        assert c.execute("SELECT count(*) FROM jobs.audit() WHERE violations > 0").fetchone()[0] == 0


def test_core_cases_through_a_cluster(cluster, procs, declared):
    from jobfence import Client

    procs.use_redis(cluster.url)
    with Client(declared, cluster.url) as client:
        core_cases.run(procs, client, sql_url=declared, audit_url=declared,
                       what="every job done through the cluster")


def test_an_idle_worker_on_a_cluster_wakes_for_each_queue(cluster, procs, clean_db, tmp_path):
    """Blocking pops slot by slot: a job submitted into any queue is picked up by a worker
    that was idle, without waiting for a poll of PostgreSQL."""
    from jobfence import Client

    (tmp_path / "cluster_app.py").write_text(textwrap.dedent(APP.format(queues=QUEUES)))
    procs.use_redis(cluster.url)
    w = procs.start("w1", "worker", "--app", "cluster_app:app", "--app-dir", str(tmp_path),
                    "--name", "w1", "--pop-timeout", "0.3", env={"JOBFENCE_LOG_LEVEL": "DEBUG"})
    w.wait_for("worker_ready")
    with Client(clean_db, cluster.url) as client:
        for q in QUEUES:
            job_id = client.submit(f"cl.{q}")
            wait_until(lambda: client.get(job_id).status == "done", 20,
                       what=f"a job of {q} done by the idle worker")


def test_the_http_api_through_a_cluster(cluster, procs, clean_db, tmp_path):
    """Each route that pushes, on queues whose keys live on different nodes: a batch per
    queue, a delayed job, a fan-out across two queues and an admin replay of a dead letter."""
    (tmp_path / "cluster_app.py").write_text(textwrap.dedent(APP.format(queues=QUEUES)))
    procs.use_redis(cluster.url)
    w = procs.start("w1", "worker", "--app", "cluster_app:app", "--app-dir", str(tmp_path),
                    "--name", "w1", "--pop-timeout", "0.3")
    w.wait_for("worker_ready")
    api = start_api(procs, redis_url=cluster.url)
    health = api.get("/healthz", token=None)
    assert health.status == 200 and health.data["redis"] == "ok", health.data

    ids = []
    for q in QUEUES:
        batch = api.post("/jobs/batch", {"jobs": [{"kind": f"cl.{q}", "payload": {"i": i}}
                                                  for i in range(20)]})
        assert batch.status == 202 and batch.data["enqueued"] is True, batch.data
        ids += [j["id"] for j in batch.data["jobs"]]
    delayed = api.post("/jobs", {"kind": "cl.beta", "run_after": 1})
    assert delayed.status == 202, delayed.data
    ids.append(delayed.data["id"])
    family = api.post("/jobs/fan-out", {"children": [{"kind": "cl.alpha"}, {"kind": "cl.gamma"}],
                                        "then": {"kind": "cl.beta"}})
    assert family.status == 202 and family.data["enqueued"] is True, family.data
    ids += [family.data["id"]] + [c["id"] for c in family.data["children"]]

    # A dead letter: cancelled while it waits (an hour ahead), then replayed by an admin.
    dead = api.post("/jobs", {"kind": "cl.gamma", "run_after": 3600}).data["id"]
    assert api.post(f"/jobs/{dead}/cancel", {}).status == 200
    assert api.get(f"/jobs/{dead}").data["status"] == "failed"
    replayed = api.post(f"/jobs/{dead}/replay", token=ADMIN_TOKEN)
    assert replayed.status == 202, replayed.data
    ids.append(dead)

    for job_id in ids:
        assert api.get(f"/jobs/{job_id}?wait=30").data["status"] == "done", job_id
    assert not api.proc.find("enqueue_failed") and not w.find("pop_failed"), api.proc.tail()
    with psycopg.connect(clean_db, autocommit=True) as c:
        assert c.execute("SELECT count(*) FROM jobs.audit() WHERE violations > 0").fetchone()[0] == 0
