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
