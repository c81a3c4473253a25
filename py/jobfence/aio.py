"""``AsyncClient``: the producer side of ``Client`` for asyncio applications (web handlers).

Same contract: ``jobs.submit(..., notify => false)`` commits, then the id is pushed; a Redis
failure parks the job with ``jobs.mark_enqueue_failed`` and the id is still returned.

The ``*_jobs`` methods and the operator calls below answer rows (a batch's with the columns
its answer needs), whether a row was created and whether its signal reached Redis: what the
HTTP API (``jobfence.api``) reports.
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any, AsyncIterator, Iterable, Sequence

import psycopg
import redis
from psycopg.rows import dict_row, tuple_row
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool

from . import log as jlog
from . import redis_urls, rows, sql
from .client import Client
from .db import (LostConnections, checked_run_after, connect_kwargs, single_spec_options,
                 stamp_returned)
from .errors import IdempotencyKeyReused, translate
from .jsonload import tolerate_async
from .transport import fill_pipeline

logger = logging.getLogger("jobfence.aio")


@dataclass(frozen=True)
class Submitted:
    """A job as a submit left it; ``created`` is false for an idempotent repeat. After a
    failed push the row says ``enqueue_failed``, as PostgreSQL then holds it."""

    job: rows.Job
    created: bool


def _with_created(found: list[rows.Job]) -> list[Submitted]:
    return [Submitted(*rows.split_created(job)) for job in found]


def _parked(items: list[Submitted], enqueued: bool) -> list[Submitted]:
    """The rows as PostgreSQL now holds them after a failed push parked the queued ones."""
    if enqueued:
        return items
    return [Submitted(replace(s.job, status="enqueue_failed"), s.created)
            if s.job.status == "queued" and not (s.job.pending_children or 0) else s
            for s in items]


class AsyncClient:
    """``async with AsyncClient(db_url, redis_url) as c: job_id = await c.submit(...)``"""

    def __init__(self, database_url: str, redis_url: str, *, pool_size: int = 4,
                 timeout: float = 10.0, name: str = "jobfence-client"):
        self.pool = AsyncConnectionPool(
            database_url, min_size=1, max_size=pool_size, open=False, timeout=timeout,
            kwargs=connect_kwargs(name),
            # No reset callback, as db.Database: connection() stamps the return itself, so a
            # returned connection is back in the pool at once instead of after a pool task.
            check=LostConnections(name).check_async,
            # As db.Database: a value Python's json refuses arrives as UndecodedJson.
            configure=tolerate_async)
        self.redis = redis_urls.connect_async(redis_url, socket_timeout=5.0,
                                             socket_connect_timeout=2.0)
        self._namespace: str | None = None  # jobs.redis_namespace(), at the first push

    async def __aenter__(self) -> "AsyncClient":
        await self.pool.open()
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    async def close(self) -> None:
        await self.pool.close()
        await self.redis.aclose()

    @contextlib.asynccontextmanager
    async def connection(self) -> AsyncIterator[psycopg.AsyncConnection]:
        """A pooled connection, stamped on its return (see db.sat_idle)."""
        async with self.pool.connection() as conn:
            try:
                yield conn
            finally:
                stamp_returned(conn)

    async def _submitted(self, query, params, row_factory, created, compare) -> list:
        """A submit; with ``compare`` (the specs as the caller means them), a repeated key
        whose request differs from its job raises IdempotencyKeyReused and the whole submit
        is rolled back. ``created(rows)`` says, per spec, whether its job was created."""
        if compare is None:
            return await self._all(query, params, row_factory)
        async with self.connection() as conn:
            try:
                async with conn.transaction():
                    async with conn.cursor(row_factory=row_factory) as cur:
                        await cur.execute(query, params)
                        found = await cur.fetchall()
                    repeats = [(i, spec) for i, (spec, new) in
                               enumerate(zip(compare, created(found))) if not new]
                    if repeats:
                        async with conn.cursor(row_factory=dict_row) as cur:
                            await cur.execute(sql.REPEAT_DIFFERENCES, {"specs": Jsonb(
                                [Client._normalise(spec) for _, spec in repeats])})
                            differing = await cur.fetchall()
                        if differing:
                            for d in differing:  # positions in the caller's specs
                                d["pos"] = repeats[d["pos"]][0]
                            raise IdempotencyKeyReused(differing)
                    return found
            except psycopg.Error as exc:
                mapped = translate(exc)
                if mapped is exc:
                    raise
                raise mapped from None

    async def _all(self, query, params, row_factory=dict_row) -> list:
        async with self.connection() as conn:
            try:
                async with conn.cursor(row_factory=row_factory) as cur:
                    await cur.execute(query, params)
                    return await cur.fetchall()
            except psycopg.Error as exc:
                mapped = translate(exc)
                if mapped is exc:
                    raise
                raise mapped from None

    async def submit(self, kind: str, payload: Any = None, *, idempotency_key: str | None = None,
                     run_after: datetime | None = None, ordering_key: str | None = None,
                     priority: int | None = None,
                     conn: psycopg.AsyncConnection | None = None, **scope) -> int:
        """``conn``: on the caller's connection, inside its transaction, pushed by the relay
        once it commits (``Client.submit``). ``scope``: unique_while, unique_for, debounce,
        depends_on, on_dependency_failure, concurrency_key."""
        params = {"kind": kind, "payload": Jsonb({} if payload is None else payload),
                  "idempotency_key": idempotency_key, "run_after": checked_run_after(run_after),
                  "ordering_key": ordering_key, "notify": conn is not None, "priority": priority,
                  **single_spec_options(**scope)}
        if conn is not None:
            try:
                async with conn.cursor(row_factory=rows.JOB) as cur:
                    await cur.execute(sql.SUBMIT, params)
                    return (await cur.fetchone()).id
            except psycopg.Error as exc:
                mapped = translate(exc)
                if mapped is exc:
                    raise
                raise mapped from None
        (job,) = await self._all(sql.SUBMIT, params, rows.JOB)
        await self._signal([job])
        return job.id

    async def submit_many(self, specs: Sequence[dict | tuple]) -> list[int]:
        submitted = await self._all(sql.SUBMIT_MANY_SIGNALS,
                                    {"specs": Jsonb(Client._normalised(specs))}, tuple_row)
        await self._push([(job_id, queue, due, priority)
                          for job_id, queue, due, waits, priority in submitted if waits])
        return [row[0] for row in submitted]

    async def submit_job(self, kind: str, payload: Any = None, *,
                         idempotency_key: str | None = None, run_after: datetime | None = None,
                         ordering_key: str | None = None, priority: int | None = None,
                         compare: dict | None = None, **scope) -> tuple[Submitted, bool]:
        """``submit`` answering (the job, whether its signal reached Redis). ``compare``: the
        spec to hold a repeated key's job to (see ``_submitted``)."""
        found = await self._submitted(sql.SUBMIT_CREATED, {
            "kind": kind, "payload": Jsonb({} if payload is None else payload),
            "idempotency_key": idempotency_key, "run_after": checked_run_after(run_after),
            "ordering_key": ordering_key, "priority": priority, **single_spec_options(**scope)}, rows.JOB,
            lambda got: [s.created for s in _with_created(got)],
            None if compare is None or idempotency_key is None else [compare])
        submitted = _with_created(found)
        enqueued = await self._signal([s.job for s in submitted])
        return _parked(submitted, enqueued)[0], enqueued

    async def submit_jobs(self, specs: Sequence[dict | tuple],
                          compare: Sequence[dict] | None = None) -> tuple[list[Submitted], bool]:
        """``submit_many`` (all or nothing) answering the rows in spec order. Each job holds
        the columns a submit is answered and signalled with (id, kind, queue, status,
        run_after, priority, pending_children); the others keep their defaults. ``compare``:
        per spec, what a repeated key's job is held to (see ``_submitted``)."""
        found = await self._submitted(sql.SUBMIT_MANY_CREATED,
                                      {"specs": Jsonb(Client._normalised(specs))},
                                      tuple_row, lambda got: [row[-1] for row in got], compare)
        submitted = [Submitted(rows.Job(id=i, kind=kind, queue=queue, status=status, run_after=due,
                                        priority=priority, pending_children=waiting), created)
                     for i, kind, queue, status, due, priority, waiting, created in found]
        enqueued = await self._signal([s.job for s in submitted])
        return _parked(submitted, enqueued), enqueued

    async def fan_out_jobs(self, children: Sequence[dict | tuple], then: dict | tuple,
                           compare: dict | None = None) -> tuple[Submitted, list[rows.Job], bool]:
        """``fan_out``: (the coordinator, its children, whether their signals were pushed).
        ``compare``: what a repeated coordinator key's job is held to (see ``_submitted``)."""
        (coordinator,) = _with_created(await self._submitted(sql.FAN_OUT_CREATED, {
            "children": Jsonb(Client._normalised(children)),
            "then_spec": Jsonb(Client._normalised([then])[0])}, rows.JOB,
            lambda got: [s.created for s in _with_created(got)],
            None if compare is None else [compare]))
        # As Client.fan_out: the children's ids are only known by reading them back.
        kids = _with_created(await self._all(sql.CHILDREN, {"job_id": coordinator.job.id},
                                             rows.JOB))
        enqueued = await self._signal([coordinator.job] + [k.job for k in kids])
        return coordinator, [k.job for k in _parked(kids, enqueued)], enqueued

    async def get(self, job_id: int) -> rows.Job:
        return (await self._all(sql.GET, {"job_id": job_id}, rows.JOB))[0]

    async def terminal_jobs(self, job_ids: Sequence[int]) -> list[rows.Job]:
        """Those of the jobs that are done or failed, in one statement."""
        if not job_ids:
            return []
        return await self._all(sql.TERMINAL_JOBS, {"job_ids": list(job_ids)}, rows.JOB)

    async def events(self, job_id: int) -> list[rows.Event]:
        return await self._all(sql.EVENTS, {"job_id": job_id}, rows.EVENT)

    async def children(self, job_id: int) -> list[rows.Job]:
        return await self._all(sql.CHILDREN, {"job_id": job_id}, rows.JOB)

    async def dependencies(self, job_id: int) -> list[rows.Neighbour]:
        """The jobs this one depends on (``jobs.dependencies``)."""
        return await self._all(sql.DEPENDENCIES, {"job_id": job_id}, rows.NEIGHBOUR)

    async def dependents(self, job_id: int) -> list[rows.Neighbour]:
        """The jobs depending on this one (``jobs.dependents``)."""
        return await self._all(sql.DEPENDENTS, {"job_id": job_id}, rows.NEIGHBOUR)

    async def list_jobs(self, *, kind: str | None = None, status: str | None = None,
                        before_id: int | None = None, max_jobs: int = 100,
                        queue: str | None = None,
                        ordering_key: str | None = None) -> list[rows.Job]:
        return await self._all(sql.LIST_JOBS, {"kind": kind, "status": status,
                                               "before_id": before_id, "max_jobs": max_jobs,
                                               "queue": queue, "ordering_key": ordering_key},
                               rows.JOB)

    async def queue_depth(self) -> list[dict]:
        return await self._all(sql.QUEUE_DEPTH, None)

    async def redis_namespace(self) -> str:
        """The prefix of this deployment's Redis keys, asked once (``jobs.redis_namespace``)."""
        if self._namespace is None:
            found = await self._all(sql.REDIS_NAMESPACE, None)
            self._namespace = found[0]["namespace"]
        return self._namespace

    async def queues(self) -> list[str]:
        return [r["queue"] for r in await self._all(sql.QUEUES, None)]

    async def cancel(self, job_id: int, reason: str = "cancelled") -> tuple[rows.Outcome, bool]:
        """``jobs.cancel``, then push the jobs it woke: (outcome, whether that push worked)."""
        (outcome,) = await self._all(sql.CANCEL, {"job_id": job_id, "reason": reason},
                                     rows.OUTCOME)
        return outcome, await self._signal_ids(outcome.wake or [])

    async def replay(self, job_id: int) -> tuple[bool, bool]:
        """``jobs.replay`` (which does not signal), then push the id: (replayed, pushed)."""
        (found,) = await self._all(sql.REPLAY, {"job_id": job_id})
        replayed = bool(found["replayed"])
        return replayed, (await self._signal_ids([job_id])) if replayed else True

    async def replay_many(self, kind: str | None, *, error_like: str | None = None,
                          failed_since=None, max_jobs: int = 1000) -> tuple[list[int], bool]:
        """``jobs.replay_many``, then push what it re-queued: (ids, pushed)."""
        found = await self._all(sql.REPLAY_MANY, {"kind": kind, "error_like": error_like,
                                                  "failed_since": failed_since,
                                                  "max_jobs": max_jobs}, rows.SIGNAL)
        ids = [s.job_id for s in found]
        return ids, (await self._signal_ids(ids)) if ids else True

    async def pause(self, queue: str) -> bool:
        """``jobs.pause``: True if the queue was running."""
        (found,) = await self._all(sql.PAUSE, {"queue": queue})
        return bool(found["changed"])

    async def resume(self, queue: str, batch: int = 10_000) -> tuple[bool, int, bool]:
        """``jobs.resume``, then signal up to ``batch`` of the queue's claimable jobs, as
        ``Client.resume``: (whether it was paused, jobs signalled, whether the push worked)."""
        (found,) = await self._all(sql.RESUME, {"queue": queue})
        waiting = await self._all(sql.STALE_QUEUED, {"queue": queue, "older_than": timedelta(0),
                                                     "max_jobs": batch}, rows.SIGNAL)
        pushed = await self._push([s.push_tuple() for s in waiting])
        return bool(found["changed"]), len(waiting), pushed

    async def _signal_ids(self, job_ids: Sequence[int]) -> bool:
        if not job_ids:
            return True
        found = await self._all(sql.SIGNALS, {"job_ids": list(job_ids)}, rows.SIGNAL)
        return await self._push([s.push_tuple() for s in found])

    async def _signal(self, jobs: Iterable[rows.Job]) -> bool:
        return await self._push([(j.id, j.queue, j.run_after, j.priority) for j in jobs
                                 if j.status == "queued" and not (j.pending_children or 0)])

    async def _push(self, todo: list) -> bool:
        """One Redis pipeline for the batch; on failure park it for the reaper. True when
        every signal reached Redis (or none was needed)."""
        if not todo:
            return True
        try:
            namespace = await self.redis_namespace()
            pipe = self.redis.pipeline(transaction=False)
            fill_pipeline(pipe, todo, namespace)
            await pipe.execute()
            return True
        except (redis.RedisError, OSError) as exc:
            ids = [signal[0] for signal in todo]
            await self._all(sql.MARK_ENQUEUE_FAILED, {"job_ids": ids})
            jlog.event(logger, logging.WARNING, "enqueue_failed",
                       "Redis push failed after commit; parked as enqueue_failed for the reaper",
                       job_ids=ids[:20], count=len(ids), error=str(exc))
            return False
