"""Issue 7: the client learns where to push replayed and woken jobs with one ``jobs.signals``
call, whatever the number of ids, instead of one ``jobs.get`` per id."""

from __future__ import annotations

from urllib.parse import quote

import psycopg
import redis as redis_lib

from jobfence import Client
from jobfence.db import Database
from jobfence.transport import ready_key

from conftest import wait_until


def _ready_ids(redis_url: str, queue: str = "default") -> list[int]:
    r = redis_lib.Redis.from_url(redis_url)
    try:
        return [int(x) for x in r.lrange(ready_key(queue), 0, -1)]
    finally:
        r.close()


def _flush(redis_url: str) -> None:
    r = redis_lib.Redis.from_url(redis_url)
    try:
        r.flushdb()
    finally:
        r.close()


def _two_waiting_on_one(db: Database) -> tuple[int, int, int]:
    """A fan-in child that also heads an ordering key: cancelling it wakes its coordinator
    and the next job of the key, two ids in one outcome. Nothing is pushed."""
    coordinator = db.fan_out([{"kind": "noop", "payload": {}, "ordering_key": "k",
                               "notify": False}],
                             {"kind": "noop", "payload": {}, "notify": False})
    (child,) = db.children(coordinator.id)
    successor = db.submit("noop", {}, ordering_key="k", notify=False)
    return child.id, coordinator.id, successor.id


def test_cancel_pushes_every_job_it_wakes(declared, redis_url):
    db = Database(declared, max_size=1, open_timeout=10)
    try:
        child, coordinator, successor = _two_waiting_on_one(db)
        _flush(redis_url)
        with Client(declared, redis_url) as client:
            outcome = client.cancel(child)
        assert sorted(outcome.wake) == sorted([coordinator, successor])
        assert sorted(_ready_ids(redis_url)) == sorted([coordinator, successor])
    finally:
        db.close()


def test_replay_pushes_the_replayed_job_and_nothing_for_a_done_one(declared, redis_url):
    db = Database(declared, max_size=1, open_timeout=10)
    try:
        failed = db.submit("noop", {}, notify=False)
        done = db.submit("noop", {}, notify=False)
        leases = {l.job_id: l for l in db.claim_many([failed.id, done.id], "t-worker")}
        db.fail(failed.id, "t-worker", leases[failed.id].lease_version, "boom", retryable=False)
        db.complete(done.id, "t-worker", leases[done.id].lease_version, {"ok": True})
        _flush(redis_url)
        with Client(declared, redis_url) as client:
            assert client.replay(failed.id) is True
            assert client.replay(done.id) is False
        assert _ready_ids(redis_url) == [failed.id]
    finally:
        db.close()


def test_woken_ids_are_looked_up_in_one_round_trip(declared, redis_url):
    """Counted by PostgreSQL itself: the client's only backend tracks its function calls
    (track_functions, for this connection alone), and the counters are read once that
    backend has flushed them."""
    db = Database(declared, max_size=1, open_timeout=10)
    try:
        child, coordinator, successor = _two_waiting_on_one(db)
    finally:
        db.close()

    def calls(conn) -> dict[str, int]:
        conn.execute("SELECT pg_stat_clear_snapshot()")
        found = conn.execute(
            "SELECT funcname, calls FROM pg_stat_user_functions "
            "WHERE schemaname = 'jobs' AND funcname IN ('get', 'signals')").fetchall()
        return {"get": 0, "signals": 0, **{name: int(n) for name, n in found}}

    tracked = declared + "?options=" + quote("-c track_functions=all")
    with psycopg.connect(declared, autocommit=True) as conn:
        before = calls(conn)
        with Client(tracked, redis_url, pool_size=1) as client:
            outcome = client.cancel(child)
        assert sorted(outcome.wake) == sorted([coordinator, successor])

        def flushed():
            # Closing the client ended its backend, which flushes its counters on the way out.
            now = calls(conn)
            return now if now["signals"] > before["signals"] else None

        after = wait_until(flushed, 20, interval=0.1, what="the client's function counters")
    assert after["signals"] - before["signals"] == 1
    assert after["get"] - before["get"] == 0
