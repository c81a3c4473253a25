"""``AsyncClient``: the producer side of ``Client`` for asyncio applications (web handlers).

Same contract: ``jobs.submit(..., notify => false)`` commits, then the id is pushed; a Redis
failure parks the job with ``jobs.mark_enqueue_failed`` and the id is still returned.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any, Iterable, Sequence

import psycopg
import redis
import redis.asyncio as aioredis
from psycopg.rows import dict_row, tuple_row
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool

from . import log as jlog
from . import rows, sql
from .client import Client
from .errors import translate
from .transport import fill_pipeline

logger = logging.getLogger("jobfence.aio")


class AsyncClient:
    """``async with AsyncClient(db_url, redis_url) as c: job_id = await c.submit(...)``"""

    def __init__(self, database_url: str, redis_url: str, *, pool_size: int = 4,
                 timeout: float = 10.0):
        self.pool = AsyncConnectionPool(
            database_url, min_size=1, max_size=pool_size, open=False, timeout=timeout,
            kwargs={"autocommit": True, "application_name": "jobfence-client"},
            check=AsyncConnectionPool.check_connection)
        self.redis = aioredis.Redis.from_url(redis_url, socket_timeout=5.0,
                                             socket_connect_timeout=2.0)

    async def __aenter__(self) -> "AsyncClient":
        await self.pool.open()
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    async def close(self) -> None:
        await self.pool.close()
        await self.redis.aclose()

    async def _all(self, query, params, row_factory=dict_row) -> list:
        async with self.pool.connection() as conn:
            try:
                async with conn.cursor(row_factory=row_factory) as cur:
                    await cur.execute(query, params)
                    return await cur.fetchall()
            except psycopg.Error as exc:
                mapped = translate(exc)
                if mapped is exc:
                    raise
                raise mapped from exc

    async def submit(self, kind: str, payload: Any = None, *, idempotency_key: str | None = None,
                     run_after: datetime | None = None, ordering_key: str | None = None) -> int:
        (job,) = await self._all(sql.SUBMIT, {
            "kind": kind, "payload": Jsonb({} if payload is None else payload),
            "idempotency_key": idempotency_key, "run_after": run_after,
            "ordering_key": ordering_key, "notify": False}, rows.JOB)
        await self._signal([job])
        return job.id

    async def submit_many(self, specs: Sequence[dict | tuple]) -> list[int]:
        submitted = await self._all(sql.SUBMIT_MANY_SIGNALS,
                                    {"specs": Jsonb([Client._normalise(s) for s in specs])}, tuple_row)
        await self._push([(job_id, queue, due) for job_id, queue, due, waits in submitted if waits])
        return [row[0] for row in submitted]

    async def get(self, job_id: int) -> rows.Job:
        return (await self._all(sql.GET, {"job_id": job_id}, rows.JOB))[0]

    async def _signal(self, jobs: Iterable[rows.Job]) -> None:
        await self._push([(j.id, j.queue, j.run_after) for j in jobs
                          if j.status == "queued" and not (j.pending_children or 0)])

    async def _push(self, todo: list) -> None:
        """One Redis pipeline for the batch; on failure park it for the reaper."""
        if not todo:
            return
        try:
            pipe = self.redis.pipeline(transaction=False)
            fill_pipeline(pipe, todo)
            await pipe.execute()
        except (redis.RedisError, OSError) as exc:
            ids = [job_id for job_id, _, _ in todo]
            await self._all(sql.MARK_ENQUEUE_FAILED, {"job_ids": ids})
            jlog.event(logger, logging.WARNING, "enqueue_failed",
                       "Redis push failed after commit; parked as enqueue_failed for the reaper",
                       job_ids=ids[:20], count=len(ids), error=str(exc))
