"""Corrupt Redis state is a fault like any other: a key of the wrong type, members that are
not job ids, a queue name that is not UTF-8. Each may cost its own queue some latency; none
may stop a worker, the reaper or the relay, or hold up any other queue.

Every test runs real ``jobfence worker`` and ``jobfence reaper`` processes. The worker serves
two queues: ``bad``, whose Redis state is corrupted before anything starts, and ``good``.
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta, timezone

import psycopg
import pytest
import redis as redis_lib

from jobfence import Client
from jobfence.db import Database
from jobfence.transport import MAX_JOB_ID, delayed_key, ready_key

from conftest import E2E_TYPE_OPTIONS, wait_until

BAD, GOOD = "bad", "good"
# Members no job id looks like: out of range, signed, not decimal, not UTF-8.
GARBAGE = [b"-5", b"0", str(MAX_JOB_ID + 1).encode(), b"9" * 40, b"abc", b"\x00\x01",
           b"\xff\xfe\xfd", b"12\xc3", b""]


@pytest.fixture
def queues(procs):
    """``noop`` jobs go to ``good``, ``anoop`` jobs to ``bad``; declared here because the
    worker runs with --no-declare (its app would put every kind in one queue)."""
    db = Database(procs.database_url, max_size=1, open_timeout=10)
    try:
        db.define_type("noop", queue=GOOD, **E2E_TYPE_OPTIONS)
        db.define_type("anoop", queue=BAD, **E2E_TYPE_OPTIONS)
    finally:
        db.close()


@pytest.fixture
def r(procs):
    client = redis_lib.Redis.from_url(procs.redis_url)
    yield client
    client.close()


@pytest.fixture
def client(procs, queues):
    with Client(procs.database_url, procs.redis_url) as c:
        yield c


def _start(procs, *queue_args, reaper=True):
    worker = procs.worker("w1", "--no-declare", *queue_args)
    return worker, (procs.reaper() if reaper else None)


def _both_done(client, bad_job, good_job, *running):
    for job_id in (good_job, bad_job):
        assert client.wait(job_id, timeout=30).status == "done", job_id
    for p in running:
        assert p.alive(), p.tail()


def _warned(p, event, key):
    found = p.wait_for(event, key=key)
    assert found[0]["level"] == "warning"
    assert found[0]["error"]
    return found


def test_wrong_type_delayed_key(procs, client, r):
    """Today the worker's move_due shares the pop's try block: a string at the delayed key
    turned every pop of the worker into a redis_unavailable retry."""
    r.set(delayed_key(BAD), "not a zset")
    worker, reaper = _start(procs, "--queue", BAD, "--queue", GOOD)
    good = client.submit("noop", {"q": GOOD})
    # A retry-like signal: due in a moment, so it is pushed to the corrupt delayed key.
    bad = client.submit("anoop", {"q": BAD},
                        run_after=datetime.now(timezone.utc) + timedelta(seconds=0.5))
    _both_done(client, bad, good, worker, reaper)
    _warned(worker, "redis_key_skipped", delayed_key(BAD))
    repaired = _warned(reaper, "redis_key_repaired", delayed_key(BAD))
    assert repaired[0]["type"] == "string"
    assert r.type(delayed_key(BAD)) in (b"zset", b"none")
    assert not worker.find("redis_unavailable") and not reaper.find("redis_unavailable")


def test_wrong_type_ready_key(procs, client, r):
    """BLMPOP refuses the whole pop if any of its keys is not a list: one hash at one
    queue's ready key stopped the pops of every queue the worker serves."""
    r.hset(ready_key(BAD), "not", "a list")
    worker, reaper = _start(procs, "--queue", BAD, "--queue", GOOD)
    good = client.submit("noop", {"q": GOOD})
    bad = client.submit("anoop", {"q": BAD})  # the push fails: parked as enqueue_failed
    _both_done(client, bad, good, worker, reaper)
    _warned(worker, "redis_key_skipped", ready_key(BAD))
    repaired = _warned(reaper, "redis_key_repaired", ready_key(BAD))
    assert repaired[0]["type"] == "hash"
    assert r.type(ready_key(BAD)) in (b"list", b"none")
    assert not worker.find("redis_unavailable") and not reaper.find("redis_unavailable")


def test_wrong_type_ready_key_does_not_stop_the_reaper_tick(procs, client, r):
    """The reaper sweeps its queues in name order and ``bad`` < ``good``: today LLEN on the
    corrupt key ended every tick before ``good`` was swept, so a lost signal there stayed
    lost. The worker here serves ``good`` only; it never touches ``bad``."""
    r.set(ready_key(BAD), "not a list")
    worker, reaper = _start(procs, "--queue", GOOD)
    db = Database(procs.database_url, max_size=1, open_timeout=10)
    try:
        lost = db.submit("noop", {"signal": "never sent"}, notify=False)
    finally:
        db.close()
    assert client.wait(lost.id, timeout=30).status == "done"
    assert worker.alive() and reaper.alive()
    _warned(reaper, "redis_key_repaired", ready_key(BAD))


def test_garbage_members_in_ready_list_and_delayed_set(procs, client, r):
    r.rpush(ready_key(BAD), *GARBAGE)
    r.zadd(delayed_key(BAD), {g: 0 for g in GARBAGE if g})
    r.zadd(delayed_key(BAD), {b"\xff later": "+inf"})  # never due: must not matter
    worker, reaper = _start(procs, "--queue", BAD, "--queue", GOOD)
    good = client.submit("noop", {"q": GOOD})
    bad = client.submit("anoop", {"q": BAD})
    _both_done(client, bad, good, worker, reaper)
    # Every garbage member popped and dropped (the delayed ones once moved), but the one
    # never due; warned about once a minute per key, so here one line.
    wait_until(lambda: r.llen(ready_key(BAD)) == 0 and r.zcard(delayed_key(BAD)) == 1,
               20, what="every garbage member dropped by the worker")
    dropped = worker.wait_for("junk_signals_dropped")
    assert {e["key"] for e in dropped} == {ready_key(BAD)}
    assert len(dropped) == 1 and dropped[0]["count"] >= 1, dropped
    assert dropped[0]["level"] == "warning"
    assert not worker.find("claim_failed") and not worker.find("worker_error")


def test_queue_name_that_is_not_utf8(procs, client, r):
    """A --queue typed with bytes that are not UTF-8 reached the Redis client as a lone
    surrogate and crashed the reaper and the worker with UnicodeEncodeError."""
    odd = os.fsdecode(b"odd-\xff")
    r.rpush(b"jobfence:{odd-\xff}:ready", b"\xff", b"x")
    worker, reaper = _start(procs, "--queue", odd, "--queue", GOOD, reaper=False)
    reaper = procs.reaper("--queue", odd)
    db = Database(procs.database_url, max_size=1, open_timeout=10)
    try:
        lost = db.submit("noop", {"signal": "never sent"}, notify=False)
    finally:
        db.close()
    bad = client.submit("anoop", {"q": BAD})  # nobody serves bad: stays queued
    assert client.wait(lost.id, timeout=30).status == "done"
    skipped = _warned(reaper, "queue_skipped", "jobfence:{odd-\\xff}:ready")
    assert skipped[0]["queue"] == "odd-\\xff"
    # The worker popped the odd queue's list like any other (the junk in it was dropped).
    wait_until(lambda: worker.find("junk_signals_dropped", key="jobfence:{odd-\\xff}:ready"),
               20, what="the odd queue popped")
    assert worker.alive() and reaper.alive(), reaper.tail()
    assert client.db.get(bad).status == "queued"


def test_permanent_corruption_is_warned_about_once_per_key(procs, client, r):
    """Nobody repairs it (no reaper): the worker meets it at every pop and every
    move_due, and says so once a minute, while the good queue is served all along."""
    r.set(ready_key(BAD), "stays")
    before = r.info("commandstats").get("cmdstat_evalsha", {}).get("calls", 0)
    worker, _ = _start(procs, "--queue", BAD, "--queue", GOOD, reaper=False)
    for n in range(3):
        assert client.wait(client.submit("noop", {"n": n}), timeout=15).status == "done"
    # move_due runs every 0.5 s: wait until the worker has met the key a few more times.
    wait_until(lambda: r.info("commandstats").get("cmdstat_evalsha", {}).get("calls", 0)
               - before >= 8, 20, what="the worker meeting the corrupt key again")
    assert len(worker.find("redis_key_skipped", key=ready_key(BAD))) == 1
    assert worker.alive()
    assert r.get(ready_key(BAD)) == b"stays"  # workers skip; only the reaper repairs


def test_relay_parks_only_the_ids_a_corrupt_key_refuses(procs, client, r):
    """One relay push carries the ids of several queues: today a refusal from one key parked
    them all as enqueue_failed (and the reaper's recovery, one push too, parked them all
    again at every tick)."""
    r.set(ready_key(BAD), "not a list")
    worker, _ = _start(procs, "--queue", BAD, "--queue", GOOD, reaper=False)
    relay = procs.start("relay", "relay", "--stale-after", "3600")
    relay.wait_for("relay_listening")
    with psycopg.connect(procs.database_url, autocommit=True) as c:
        with c.transaction():  # one commit: both notifications reach the relay together
            bad = c.execute("SELECT id FROM jobs.submit('anoop', '{}', notify => true)"
                            ).fetchone()[0]
            good = c.execute("SELECT id FROM jobs.submit('noop', '{}', notify => true)"
                             ).fetchone()[0]
    assert client.wait(good, timeout=30).status == "done"
    _warned(relay, "redis_key_skipped", ready_key(BAD))
    wait_until(lambda: client.db.get(bad).status == "enqueue_failed", 20,
               what="the refused id parked for the reaper")
    reaper = procs.reaper()
    _both_done(client, bad, good, worker, reaper, relay)
