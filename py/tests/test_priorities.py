"""Priorities end to end: a real worker pops the most urgent band first, so one urgent job
submitted behind a backlog of 10,000 less urgent ones starts before them."""

from __future__ import annotations

import redis as redis_lib

from jobfence.db import Database
from jobfence.transport import BANDS, Transport, delayed_key, ready_key

from conftest import E2E_TYPE_OPTIONS, wait_until

BACKLOG = 10_000


def _backlog(client, priority: int) -> list[int]:
    ids = []
    for _ in range(BACKLOG // 1000):
        ids += client.submit_many([{"kind": "noop", "priority": priority}] * 1000)
    return ids


def _claimed_at(conn, ids):
    return dict(conn.execute("SELECT id, claimed_at FROM jobs.job WHERE id = ANY (%s)",
                             (list(ids),)).fetchall())


def test_urgent_job_submitted_behind_a_backlog_starts_first(procs, client, conn):
    backlog = _backlog(client, 5)
    urgent = client.submit("noop", {"urgent": True}, priority=0)
    procs.worker("w1", "--no-declare", "--concurrency", "4", "--batch", "20")
    assert client.wait(urgent, timeout=30).status == "done"
    urgent_at = _claimed_at(conn, [urgent])[urgent]
    earlier = conn.execute(
        "SELECT count(*) FROM jobs.job WHERE id = ANY (%s) AND claimed_at < %s",
        (backlog, urgent_at)).fetchone()[0]
    assert earlier == 0, f"{earlier} backlog jobs were claimed before the urgent one"


def test_urgent_job_overtakes_a_backlog_a_worker_is_already_draining(procs, client, conn):
    backlog = _backlog(client, 9)
    procs.worker("w1", "--no-declare", "--concurrency", "4", "--batch", "20")
    wait_until(lambda: conn.execute("SELECT count(*) FROM jobs.job WHERE kind = 'noop' AND "
                                    "status = 'done'").fetchone()[0] >= 20, 30,
               what="the worker draining the backlog")
    urgent = client.submit("noop", {"urgent": True}, priority=0)
    assert client.wait(urgent, timeout=30).status == "done"
    urgent_at = _claimed_at(conn, [urgent])[urgent]
    later = conn.execute(
        "SELECT count(*) FROM jobs.job WHERE id = ANY (%s) AND (claimed_at IS NULL OR claimed_at > %s)",
        (backlog, urgent_at)).fetchone()[0]
    # One pop of the backlog may have been in flight when it was submitted; the rest waits.
    assert later >= BACKLOG // 2, f"only {later} backlog jobs were left behind the urgent one"


def test_kind_priority_is_the_default_and_lands_in_its_band(clean_db, redis_url):
    db = Database(clean_db, max_size=1)
    t = Transport(redis_url)
    try:
        db.define_type("pr.kind", priority=3, **E2E_TYPE_OPTIONS)
        from jobfence import Client

        with Client(clean_db, redis_url) as client:
            default = client.submit("pr.kind")
            override = client.submit("pr.kind", priority=8)
            many = client.submit_many([{"kind": "pr.kind"}, {"kind": "pr.kind", "priority": 0}])
        r = t.redis
        assert r.lrange(ready_key("default", 3), 0, -1) == [str(many[0]).encode(), str(default).encode()]
        assert r.lrange(ready_key("default", 8), 0, -1) == [str(override).encode()]
        assert r.lrange(ready_key("default"), 0, -1) == [str(many[1]).encode()]
        # A pop takes band 0 first, then 3, then 8; FIFO within a band.
        assert t.pop(["default"], 10, 0.1) == [many[1]]
        assert t.pop(["default"], 10, 0.1) == [default, many[0]]
        assert t.pop(["default"], 10, 0.1) == [override]
    finally:
        db.close()
        t.close()


def test_delayed_ids_move_to_their_own_band(redis_url):
    t = Transport(redis_url)
    try:
        import time

        now = time.time()
        t.redis.zadd(delayed_key("q", 4), {"41": now - 1, "42": now + 60})
        t.redis.zadd(delayed_key("q"), {"1": now - 1})
        assert t.move_due("q") == 2
        assert t.redis.lrange(ready_key("q", 4), 0, -1) == [b"41"]
        assert t.redis.lrange(ready_key("q"), 0, -1) == [b"1"]
        assert t.redis.zrange(delayed_key("q", 4), 0, -1) == [b"42"]
        assert t.ready_length("q") == 2
        # The limit is shared by the bands, the most urgent first.
        t.redis.zadd(delayed_key("q", 2), {"21": now - 1, "22": now - 1})
        t.redis.zadd(delayed_key("q", 9), {"91": now - 1})
        assert t.move_due("q", limit=2) == 2
        assert t.redis.zrange(delayed_key("q", 9), 0, -1) == [b"91"]
    finally:
        t.close()


def test_pushed_signals_use_the_band_of_their_priority(redis_url):
    t = Transport(redis_url)
    try:
        t.push([(1, "q", None, 0), (2, "q", None, 9), (3, "q", None), (4, "q", None, None)])
        r = redis_lib.Redis.from_url(redis_url)
        keys = {k.decode() for k in r.keys("jobfence:{q}:*")}
        assert keys == {ready_key("q"), ready_key("q", 9)}
        assert sorted(r.lrange(ready_key("q"), 0, -1)) == [b"1", b"3", b"4"]
        assert len({ready_key("q", b) for b in range(BANDS)}) == BANDS
        r.close()
    finally:
        t.close()


def test_app_task_options_declare_priority_and_limits(clean_db):
    import jobfence

    app = jobfence.App("prio")

    @app.task("pr.declared", priority=4, max_running=2, rate_limit=10, rate_period=2.5)
    def handler(job_id, payload, ctx):
        return None

    db = Database(clean_db, max_size=1)
    try:
        declared = app.declare(db)["pr.declared"]
        assert (declared["priority"], declared["max_running"], declared["rate_limit"]) == (4, 2, 10)
        assert declared["rate_period"].total_seconds() == 2.5
        assert db.submit("pr.declared").priority == 4
    finally:
        db.close()


def test_http_submit_takes_a_priority(procs, declared, redis_url):
    from api_helpers import start_api

    api = start_api(procs)
    made = api.post("/jobs", {"kind": "noop", "priority": 3})
    assert made.status == 202, made.data
    job = api.get(f"/jobs/{made.data['id']}")
    assert job.data["priority"] == 3
    batch = api.post("/jobs/batch", {"jobs": [{"kind": "noop", "priority": 7}, {"kind": "noop"}]})
    assert batch.status == 202, batch.data
    ids = [j["id"] for j in batch.data["jobs"]]
    assert [api.get(f"/jobs/{i}").data["priority"] for i in ids] == [7, 0]
    r = redis_lib.Redis.from_url(redis_url)
    assert r.lrange(ready_key("default", 7), 0, -1) == [str(ids[0]).encode()]
    r.close()
    for bad in (10, -1, 2.5, "1"):
        refused = api.post("/jobs", {"kind": "noop", "priority": bad})
        assert refused.status == 400, (bad, refused.data)


def test_audit_finds_signals_in_every_band(conn, clean_db, redis_url):
    import json
    import os
    import subprocess
    import sys

    from conftest import REPO

    conn.execute("SELECT jobs.define_type('pr.audit', queue => 'aq')")
    ids = [conn.execute("SELECT id FROM jobs.submit('pr.audit', notify => false, priority => %s)",
                        (p,)).fetchone()[0] for p in (0, 4, 9, 6)]
    conn.execute("UPDATE jobs.job SET updated_at = updated_at - interval '1 minute', "
                 "run_after = run_after - interval '1 minute' WHERE id = ANY (%s)", (ids,))
    t = Transport(redis_url)
    try:
        t.push([(i, "aq", None, p) for i, p in zip(ids[:3], (0, 4, 9))])
        t.redis.zadd(delayed_key("aq", 6), {str(ids[3]): 4102444800})
    finally:
        t.close()

    def signalled():
        env = dict(os.environ, JOBFENCE_DATABASE_URL=clean_db, JOBFENCE_REDIS_URL=redis_url)
        out = subprocess.run([sys.executable, "-m", "jobfence", "audit", "--json"], cwd=REPO,
                             env=env, capture_output=True, text=True, timeout=120)
        return next(r for r in json.loads(out.stdout)["checks"] if r["check_name"] == "signalled")

    assert signalled()["violations"] == 0
    r = redis_lib.Redis.from_url(redis_url)
    r.delete(ready_key("aq", 9))
    r.close()
    lost = signalled()
    assert (lost["violations"], lost["example_job_ids"]) == (1, [ids[2]])


def test_a_popped_id_pushed_back_without_a_priority_keeps_its_band(redis_url):
    """A worker's retry or snooze names no priority: the id goes back to the band it was
    popped from, not to band 0."""
    t = Transport(redis_url)
    try:
        import time

        t.push([(77, "q", None, 6), (78, "q", None)])
        assert t.pop(["q"], 10, 0.1) == [78]
        assert t.pop(["q"], 10, 0.1) == [77]
        t.push([(77, "q", time.time() + 60), (78, "q", None)])
        assert t.redis.zrange(delayed_key("q", 6), 0, -1) == [b"77"]
        assert t.redis.lrange(ready_key("q"), 0, -1) == [b"78"]
        # An explicit priority wins.
        t.push([(77, "q", None, 2)])
        assert t.redis.lrange(ready_key("q", 2), 0, -1) == [b"77"]
    finally:
        t.close()
