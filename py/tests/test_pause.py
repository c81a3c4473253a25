"""Pausing a queue end to end: jobs submitted to a paused queue stay queued while a worker
runs, and complete promptly after the resume; the CLI, HTTP and stats surfaces."""

from __future__ import annotations

import json
import subprocess
import sys

import redis as redis_lib

from jobfence.db import Database
from jobfence.transport import ready_key

from api_helpers import ADMIN_TOKEN, start_api
from conftest import E2E_TYPE_OPTIONS, REPO, wait_until


def _cli(database_url, redis_url, *args):
    return subprocess.run([sys.executable, "-m", "jobfence", "--database-url", database_url,
                           "--redis-url", redis_url, *args],
                          capture_output=True, text=True, cwd=REPO, timeout=60)


def _statuses(client, ids):
    return {client.get(i).status for i in ids}


def test_paused_queue_waits_while_a_worker_runs_then_resume_runs_it(procs, client, redis_url):
    db = Database(procs.database_url, max_size=1)
    try:
        # A second queue the same worker serves: its job proves the worker was busy popping
        # while the paused queue's jobs stayed queued.
        db.define_type("sleep", queue="other", **E2E_TYPE_OPTIONS)
    finally:
        db.close()
    worker = procs.worker("w1", "--no-declare", "--queue", "default", "--queue", "other")
    paused = _cli(procs.database_url, redis_url, "pause", "default")
    assert paused.returncode == 0, paused.stderr
    assert "paused queue default" in paused.stdout
    worker.wait_for("queues_paused", paused=["default"], timeout=10)

    ids = client.submit_many([{"kind": "noop"}] * 20)
    sentinel = client.submit("sleep", {"seconds": 0})
    assert client.wait(sentinel, timeout=20).status == "done"
    assert _statuses(client, ids) == {"queued"}
    # Not popped: the signals wait in Redis for the resume.
    r = redis_lib.Redis.from_url(redis_url)
    assert r.llen(ready_key("default")) == len(ids)
    r.close()

    stats = _cli(procs.database_url, redis_url, "stats")
    assert stats.returncode == 0, stats.stderr
    row = next(line for line in stats.stdout.splitlines() if line.startswith("default") and " noop " in line)
    assert row.rstrip().endswith("paused")
    as_json = json.loads(_cli(procs.database_url, redis_url, "stats", "--json").stdout)
    assert [p["queue"] for p in as_json["paused_queues"]] == ["default"]

    resumed = _cli(procs.database_url, redis_url, "resume", "default", "--json")
    assert resumed.returncode == 0, resumed.stderr
    answer = json.loads(resumed.stdout)
    assert answer["changed"] is True and answer["signalled"] == len(ids)
    wait_until(lambda: _statuses(client, ids) == {"done"}, 20, what="the resumed queue's jobs done")
    again = _cli(procs.database_url, redis_url, "resume", "default")
    assert again.returncode == 0 and "was not paused" in again.stdout


def test_ids_popped_from_a_paused_queue_are_refused_and_the_resume_signals_them(client, redis_url):
    ids = client.submit_many([{"kind": "noop"}] * 5)
    assert client.pause("default") is True
    # A worker that has not noticed the pause yet pops and claims: nothing is granted.
    from jobfence.transport import Transport

    t = Transport(redis_url)
    try:
        popped = t.pop(["default"], 10, 0.5)
        assert sorted(popped) == sorted(ids)
        assert client.db.claim_many(popped, "w-late") == []
        assert client.db.held_back(popped) == []  # a pause is not a limit: no re-push
        assert t.ready_length("default") == 0
        changed, signalled = client.resume("default")
        assert (changed, signalled) == (True, len(ids))
        assert sorted(t.pop(["default"], 10, 0.5)) == sorted(ids)
    finally:
        t.close()


def test_cli_refuses_a_malformed_queue(clean_db, redis_url):
    bad = _cli(clean_db, redis_url, "pause", "bad queue")
    assert bad.returncode == 5 and "malformed" in bad.stderr and "Traceback" not in bad.stderr


def test_pause_and_resume_over_http_need_the_admin_scope(procs, declared):
    api = start_api(procs)
    refused = api.post("/queues/default/pause")
    assert refused.status == 403
    admin = start_api(procs, name="api-admin", token=ADMIN_TOKEN)
    first = admin.post("/queues/default/pause")
    assert first.status == 200 and first.data == {"queue": "default", "paused": True, "changed": True}
    assert admin.post("/queues/default/pause").data["changed"] is False
    bad = admin.post("/queues/bad%20queue/pause")
    assert bad.status == 400 and bad.data["sqlstate"] == "22023"
    resumed = admin.post("/queues/default/resume")
    assert resumed.status == 200
    assert resumed.data == {"queue": "default", "paused": False, "changed": True, "signalled": 0,
                            "enqueued": True}
