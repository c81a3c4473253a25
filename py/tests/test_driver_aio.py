"""AsyncClient against the real servers: commit, then push; park on a Redis failure."""

from __future__ import annotations

import asyncio

import redis as redis_lib

from jobfence.aio import AsyncClient
from jobfence.transport import ready_key


def test_async_submit_pushes_and_parks_when_redis_is_down(declared, redis_url):
    async def scenario():
        async with AsyncClient(declared, redis_url) as client:
            one = await client.submit("noop", {"a": 1})
            many = await client.submit_many([("noop", {"n": i}) for i in range(3)])
        async with AsyncClient(declared, "redis://127.0.0.1:1/0") as offline:
            parked = await offline.submit("noop")
            status = (await offline.get(parked)).status
        return one, many, parked, status

    one, many, parked, status = asyncio.run(scenario())
    r = redis_lib.Redis.from_url(redis_url)
    pushed = [int(x) for x in r.lrange(ready_key("default"), 0, -1)]
    r.close()
    assert sorted(pushed) == sorted([one] + many)
    assert status == "enqueue_failed" and parked not in pushed


def test_async_pool_says_when_postgresql_dropped_its_connection(declared, redis_url, caplog):
    """The async pools check idle connections as the sync ones do, with the same one line
    (db_unavailable, with a count): a dropped connection is replaced, and the log says so."""
    import logging
    import time

    import psycopg

    name = "jobfence-aio-lost-check"

    async def scenario():
        async with AsyncClient(declared, redis_url, pool_size=1, name=name) as client:
            job = await client.submit("noop")
            with psycopg.connect(declared, autocommit=True) as admin:
                killed = admin.execute("SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) "
                                       "FROM pg_stat_activity WHERE application_name = %s",
                                       (name,)).fetchone()[0]
            # The check runs on a connection that sat idle (db.sat_idle: over a second).
            time.sleep(1.2)
            found = await client.get(job)
            return killed, found

    with caplog.at_level(logging.WARNING, logger="jobfence.db"):
        killed, found = asyncio.run(scenario())
    assert killed == 1 and found.kind == "noop"
    lines = [r for r in caplog.records if getattr(r, "event", None) == "db_unavailable"]
    assert len(lines) == 1, [r.getMessage() for r in caplog.records]
    assert lines[0].fields["pool"] == name and lines[0].fields["count"] == 1


def test_submit_jobs_says_created_once_for_a_key_repeated_in_the_batch(declared, redis_url):
    """Only the first spec holding a key creates its job; the later copies are repeats, in
    the flags and in what is held to the first (compare)."""
    async def scenario():
        async with AsyncClient(declared, redis_url) as client:
            specs = [{"kind": "noop", "idempotency_key": "k"}, {"kind": "noop"},
                     {"kind": "noop", "idempotency_key": "k"}]
            plain, _ = await client.submit_jobs(specs)
            again, _ = await client.submit_jobs(specs)
            keyed = [dict(s, idempotency_key="c") if "idempotency_key" in s else s
                     for s in specs]
            compared, _ = await client.submit_jobs(keyed, compare=keyed)
        return plain, again, compared

    plain, again, compared = asyncio.run(scenario())
    assert [s.created for s in plain] == [True, True, False]
    assert plain[0].job.id == plain[2].job.id
    assert [s.created for s in again] == [False, True, False]
    assert [s.created for s in compared] == [True, True, False]
