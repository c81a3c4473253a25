"""Transactional submit from Python (docs/python.md, "Transactional submit"): the producer's
rows and its job commit together, on the caller's own connection; the relay pushes the id
after the commit, and a rollback leaves neither a job nor a signal."""

from __future__ import annotations

import asyncio

import psycopg
import pytest
import redis as redis_lib

from conftest import wait_until
from jobfence.transport import ready_key

ORDERS = "CREATE TABLE IF NOT EXISTS tx_orders (id bigint PRIMARY KEY, job_id bigint)"


@pytest.fixture
def orders(declared):
    with psycopg.connect(declared, autocommit=True) as conn:
        conn.execute(ORDERS)
        conn.execute("TRUNCATE tx_orders")
    return declared


def _ready(redis_url) -> list[int]:
    r = redis_lib.Redis.from_url(redis_url)
    try:
        return [int(x) for x in r.lrange(ready_key("default"), 0, -1)]
    finally:
        r.close()


def test_a_job_submitted_in_the_callers_transaction_commits_with_its_rows_and_runs(
        procs, client, orders, redis_url):
    procs.start("relay", "relay", "--poll-interval", "0.5").wait_for("relay_listening")
    with psycopg.connect(orders) as conn:
        with conn.transaction():
            job_id = client.submit("noop", {"order": 1}, conn=conn)
            many = client.submit_many([("noop", {"order": 1, "line": n}) for n in range(3)],
                                      conn=conn)
            conn.execute("INSERT INTO tx_orders VALUES (1, %s)", (job_id,))
            # Not before the commit: the signal would name a job other sessions cannot see.
            assert _ready(redis_url) == []
    wait_until(lambda: sorted(_ready(redis_url)) == sorted([job_id, *many]), 20,
               what="the relay pushed the committed jobs")
    procs.worker("w-tx")
    wait_until(lambda: all(client.get(i).status == "done" for i in [job_id, *many]), 30,
               what="the jobs ran")


def test_a_rolled_back_transaction_leaves_no_job_and_no_signal(procs, client, orders, redis_url):
    relay = procs.start("relay", "relay", "--poll-interval", "0.5")
    relay.wait_for("relay_listening")
    with psycopg.connect(orders) as conn:
        with pytest.raises(RuntimeError), conn.transaction():
            job_id = client.submit("noop", {"order": 2}, conn=conn)
            conn.execute("INSERT INTO tx_orders VALUES (2, %s)", (job_id,))
            raise RuntimeError("the order failed validation")
    with psycopg.connect(orders, autocommit=True) as conn:
        assert conn.execute("SELECT count(*) FROM jobs.job").fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM tx_orders").fetchone()[0] == 0
    # A job committed afterwards is relayed: the rolled-back one never was.
    later = client.submit("noop", {"order": 3}, conn=None)
    wait_until(lambda: later in _ready(redis_url), 20, what="the later job pushed")
    assert job_id not in _ready(redis_url)


def test_the_async_client_submits_in_the_callers_transaction_too(orders, redis_url):
    from jobfence.aio import AsyncClient

    async def scenario():
        async with AsyncClient(orders, redis_url) as client:
            async with await psycopg.AsyncConnection.connect(orders) as conn:
                async with conn.transaction():
                    kept = await client.submit("noop", {"order": 4}, conn=conn)
                try:
                    async with conn.transaction():
                        await client.submit("noop", {"order": 5}, conn=conn)
                        raise RuntimeError("rolled back")
                except RuntimeError:
                    pass
            return kept

    kept = asyncio.run(scenario())
    with psycopg.connect(orders, autocommit=True) as conn:
        rows = conn.execute("SELECT id, payload FROM jobs.job").fetchall()
    assert rows == [(kept, {"order": 4})]


def test_a_task_handle_defers_its_own_kind(client, orders, redis_url):
    """@app.task leaves the handler callable as before and gives it .defer / .defer_async,
    which submit its kind through the app's bound clients (or the one passed)."""
    from jobfence import App
    from jobfence.aio import AsyncClient
    from jobfence.examples import app, noop

    assert noop(1, {}, None) == {"ok": True}  # still the plain function
    with pytest.raises(RuntimeError, match="no Client bound"):
        App().task("loose")(lambda job_id, payload, ctx: None).defer({})
    app.bind(client)
    try:
        job_id = noop.defer({"n": 1}, idempotency_key="defer:1")
        assert client.get(job_id).kind == "noop" and client.get(job_id).payload == {"n": 1}
        assert noop.defer({"n": 2}, idempotency_key="defer:1") == job_id  # the key holds
        with psycopg.connect(orders) as conn:
            with conn.transaction():
                in_tx = noop.defer({"n": 3}, conn=conn)
        assert client.get(in_tx).status == "queued"

        async def deferred():
            async with AsyncClient(orders, redis_url) as aio:
                app.bind(client, aio)
                return await noop.defer_async({"n": 4})

        assert client.get(asyncio.run(deferred())).payload == {"n": 4}
    finally:
        app.bind(None, None)
