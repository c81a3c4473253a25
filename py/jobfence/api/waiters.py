"""Long polls (``GET /jobs/{id}?wait=S``) without a database connection per waiter.

Waiters park on a future keyed by job id. One background task, while anyone waits, asks
PostgreSQL which of all the awaited jobs ended — one statement for every waiter together —
every ``interval`` seconds, and resolves their futures. A thousand waiters cost one query
per tick, not a thousand connections.
"""

from __future__ import annotations

import asyncio
import logging
import time

import psycopg

from .. import log as jlog
from ..aio import AsyncClient
from ..errors import JobfenceError, JobNotFound
from ..rows import Job

logger = logging.getLogger("jobfence.api")

# Ids per statement: the poll stays one short statement however many clients wait.
CHUNK = 5000
WARN_EVERY_SECONDS = 30.0


class Waiters:
    def __init__(self, client: AsyncClient, interval: float = 0.075):
        self.client = client
        self.interval = interval
        self._waiting: dict[int, set[asyncio.Future]] = {}
        self._someone = asyncio.Event()
        self._task: asyncio.Task | None = None
        self._last_warning = 0.0
        self.polls = 0

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="jobfence-waiters")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
        for futures in self._waiting.values():
            for fut in futures:
                fut.cancel()
        self._waiting.clear()

    def count(self) -> int:
        return sum(len(f) for f in self._waiting.values())

    async def wait(self, job_id: int, timeout: float) -> Job | None:
        """The job once it is terminal, or None when ``timeout`` passed first."""
        fut = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(job_id, set()).add(fut)
        self._someone.set()
        try:
            return await asyncio.wait_for(fut, timeout)
        except asyncio.TimeoutError:
            return None
        finally:
            futures = self._waiting.get(job_id)
            if futures is not None:
                futures.discard(fut)
                if not futures:
                    del self._waiting[job_id]

    async def _run(self) -> None:
        while True:
            if not self._waiting:
                self._someone.clear()
                await self._someone.wait()
            started = time.monotonic()
            ids = list(self._waiting)
            try:
                for start in range(0, len(ids), CHUNK):
                    for job in await self._ended(ids[start:start + CHUNK]):
                        for fut in self._waiting.pop(job.id, ()):
                            if not fut.done():
                                fut.set_result(job)
            except Exception:  # noqa: BLE001 - the poller must outlive any one bad tick
                logger.exception("long-poll tick failed")
            self.polls += 1
            await asyncio.sleep(max(0.0, self.interval - (time.monotonic() - started)))

    async def _ended(self, ids: list[int]) -> list[Job]:
        try:
            return await self.client.terminal_jobs(ids)
        except JobNotFound:
            # One of them was pruned since it ended: ask one by one, so the others still
            # hear their answer (the pruned one's waiter then reads 404 itself).
            ended = []
            for job_id in ids:
                try:
                    ended += await self.client.terminal_jobs([job_id])
                except JobNotFound:
                    for fut in self._waiting.pop(job_id, ()):
                        if not fut.done():
                            fut.set_result(None)
            return ended
        except (psycopg.Error, JobfenceError) as exc:
            # The waiters keep waiting; each reads the row itself when its wait ends.
            now = time.monotonic()
            if now - self._last_warning >= WARN_EVERY_SECONDS:
                self._last_warning = now
                jlog.event(logger, logging.WARNING, "wait_poll_failed",
                           "could not poll the awaited jobs; retrying", error=str(exc).strip()[:300],
                           waiting=self.count())
            return []
