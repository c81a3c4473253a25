"""The API's ``AsyncClient``: pushes that give up quickly while Redis is unwell.

A submit answers once its job is committed; the push to Redis only speeds its pickup (the
reaper signals an ``enqueue_failed`` job anyway). So a Redis that accepts connections but
never answers must not hold every request for a socket timeout: after a failed push, pushes
are skipped (the jobs parked as ``enqueue_failed`` at once) for ``BACKOFF_SECONDS``; then one
request tries again while the others keep skipping, and the first push that works ends it.
"""

from __future__ import annotations

import logging
import time

from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError

from .. import log as jlog
from .. import redis_urls, sql
from ..aio import AsyncClient

logger = logging.getLogger("jobfence.api")

# What one request may wait for Redis: a push is a handful of small commands, far below this
# when Redis is well.
PUSH_TIMEOUT_SECONDS = 0.75
BACKOFF_SECONDS = 1.0
WARN_EVERY_SECONDS = 30.0


class ApiClient(AsyncClient):
    def __init__(self, database_url: str, redis_url: str, **kw):
        super().__init__(database_url, redis_url, **kw)
        # One retry for a connection Redis dropped (a restart), none for a timeout: a
        # silent Redis would otherwise cost each request several timeouts.
        self.redis = redis_urls.connect_async(
            redis_url, socket_timeout=PUSH_TIMEOUT_SECONDS,
            socket_connect_timeout=PUSH_TIMEOUT_SECONDS,
            retry=Retry(NoBackoff(), 1, supported_errors=(RedisConnectionError,)))
        self._retry_at: float | None = None
        self._probing = False
        self._warnings = jlog.Throttle(WARN_EVERY_SECONDS)
        self.skipped = 0

    @property
    def redis_backing_off(self) -> bool:
        return self._retry_at is not None

    async def _push(self, todo: list) -> bool:
        if not todo:
            return True
        now = time.monotonic()
        if self._retry_at is not None and (now < self._retry_at or self._probing):
            await self._park([signal[0] for signal in todo])
            return False
        probing = self._retry_at is not None
        self._probing = self._probing or probing
        try:
            pushed = await super()._push(todo)
        finally:
            if probing:
                self._probing = False
        if pushed:
            if self._retry_at is not None:
                jlog.event(logger, logging.INFO, "redis_push_recovered",
                           "Redis answers again; pushing signals", skipped=self.skipped)
            self._retry_at = None
        else:
            self._retry_at = time.monotonic() + BACKOFF_SECONDS
        return pushed

    async def _park(self, ids: list[int]) -> None:
        await self._all(sql.MARK_ENQUEUE_FAILED, {"job_ids": ids})
        self.skipped += len(ids)
        if self._warnings.allow() is not None:
            jlog.event(logger, logging.WARNING, "enqueue_skipped",
                       "a recent Redis push failed: parked as enqueue_failed without trying "
                       "Redis, for the reaper", job_ids=ids[:20], count=len(ids),
                       backoff_s=BACKOFF_SECONDS)
