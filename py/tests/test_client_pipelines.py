"""Issue 7: producers push in batches — one Redis pipeline per batch, not one per id — and log
nothing per job above DEBUG. Counted by Redis itself (INFO commandstats) on this session's
private server: a pipeline of one queue's due ids is exactly one LPUSH."""

from __future__ import annotations

import signal

import psycopg
import pytest
import redis as redis_lib
from psycopg.types.json import Jsonb

from jobfence.transport import ready_key

from conftest import wait_until

N = 200


def _lpush_calls(r) -> int:
    return int(r.info("commandstats").get("cmdstat_lpush", {}).get("calls", 0))


def test_submit_many_pushes_one_pipeline(client, redis_url):
    r = redis_lib.Redis.from_url(redis_url)
    try:
        before = _lpush_calls(r)
        ids = client.submit_many([("noop", {"n": i}) for i in range(N)])
        # One push per read of the socket, not per job: 200 notifications (14 kB) may take
        # libpq two or three reads, never anything near 200.
        assert _lpush_calls(r) - before <= 3
        assert sorted(int(x) for x in r.lrange(ready_key("default"), 0, -1)) == sorted(ids)
    finally:
        r.close()


def test_relay_pushes_what_has_arrived_as_one_batch(procs, declared):
    relay = procs.start("relay", "relay", "--poll-interval", "0.5",
                        env={"JOBFENCE_LOG_LEVEL": "DEBUG"})
    relay.wait_for("relay_listening")
    r = redis_lib.Redis.from_url(procs.redis_url)
    try:
        # Paused, the relay cannot read while the notifications are delivered: when it runs
        # again they are all waiting on its socket, one batch by any measure.
        relay.signal(signal.SIGSTOP)
        before = _lpush_calls(r)
        with psycopg.connect(declared) as conn:  # one transaction: N notifications on commit
            ids = [conn.execute("SELECT id FROM jobs.submit(kind => 'noop', payload => %s)",
                                [Jsonb({"n": i})]).fetchone()[0]
                   for i in range(N)]
        relay.signal(signal.SIGCONT)
        try:
            wait_until(lambda: r.llen(ready_key("default")) == N, 20, what="every id relayed")
        except pytest.fail.Exception:
            # What the relay did says why: fewer ids (skipped, lost), or more (a reconnect's
            # catch-up pushing them again).
            pytest.fail(f"{r.llen(ready_key('default'))} ids in the ready list, want {N}; "
                        f"{_lpush_calls(r) - before} LPUSH calls\n{relay.tail()}")
        # One push per read of the socket, not per job: 200 notifications (14 kB) may take
        # libpq two or three reads, never anything near 200.
        assert _lpush_calls(r) - before <= 3
        assert sorted(int(x) for x in r.lrange(ready_key("default"), 0, -1)) == sorted(ids)
        relay.wait_for("relayed", count=N)
        loud = [e for e in relay.events()
                if e["level"] != "debug" and ("job_id" in e or "job_ids" in e)]
        assert loud == []
    finally:
        r.close()
