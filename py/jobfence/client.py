"""Producer and operator API: submit (commit, then push), inspect, cancel, replay."""

from __future__ import annotations

import logging
import time
from datetime import datetime, timedelta
from typing import Any, Iterable, Sequence

import psycopg
import redis

from . import log as jlog
from .db import Database, job_spec
from .rows import Event, Job, Neighbour, Outcome
from .tracing import current_traceparent
from .transport import Transport

logger = logging.getLogger("jobfence.client")

TERMINAL = ("done", "failed")


class Client:
    """Submit jobs and look after them.

    ``submit`` follows docs/design.md §6: ``jobs.submit(..., notify => false)`` commits the row, then
    the id is pushed to Redis; if the push fails the job is parked with
    ``jobs.mark_enqueue_failed`` (the reaper recovers it) and the id is still returned —
    the job is durable either way.
    """

    def __init__(self, database_url: str, redis_url: str, *, pool_size: int = 2,
                 timeout: float = 10.0):
        # timeout: how long a call waits for a PostgreSQL connection before raising.
        self.db = Database(database_url, max_size=pool_size, name="jobfence-client",
                           timeout=timeout)
        # The deployment's key prefix, asked at the first push.
        self.transport = Transport(redis_url, namespace=self.db.redis_namespace)

    def close(self) -> None:
        self.db.close()
        self.transport.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- producing ------------------------------------------------------------------------
    def submit(self, kind: str, payload: Any = None, *, idempotency_key: str | None = None,
               run_after: datetime | None = None, ordering_key: str | None = None,
               priority: int | None = None, conn: psycopg.Connection | None = None,
               unique_while: Sequence[str] | None = None,
               unique_for: float | timedelta | str | None = None,
               debounce: str | None = None, depends_on: Sequence[int] | None = None,
               on_dependency_failure: str | None = None,
               concurrency_key: str | None = None) -> int:
        """``priority``: 0 (runs first) to 9; None takes the kind's (docs/python.md).

        ``concurrency_key`` (a tenant, a customer): the key the kind's ``max_running_per_key``
        counts running jobs by, and the key ``jobs.claim_next`` takes turns between
        (docs/python.md, "Per-key concurrency").

        ``depends_on``: ids of jobs this one waits for; ``on_dependency_failure`` ("fail",
        the default, "run" or "wait") says what a failed one does to it (docs/python.md,
        "Dependencies"). A job still waiting is not signalled: its last dependency's finish
        wakes it.

        ``unique_while`` (job states, including "queued"), ``unique_for`` (seconds, a
        timedelta or "1 hour") and ``debounce`` ("payload", "run_after" or
        "payload_and_run_after") scope ``idempotency_key`` and say what a repeat changes
        (docs/python.md, "Scoped keys and debounce"). A debounced job is signalled again
        for its new run_after.

        ``conn``: submit on the caller's psycopg connection, inside its transaction, so an
        application writes its rows and its job in one commit. Nothing is pushed here: the
        outbox notification is delivered on commit (none on rollback) and `jobfence relay`
        pushes the id (docs/python.md, "Transactional submit")."""
        if conn is not None:
            return self.db.submit(kind, payload, idempotency_key=idempotency_key,
                                  run_after=run_after, ordering_key=ordering_key, notify=True,
                                  priority=priority, conn=conn, unique_while=unique_while,
                                  unique_for=unique_for, debounce=debounce, depends_on=depends_on,
                                  on_dependency_failure=on_dependency_failure,
                                  concurrency_key=concurrency_key).id
        job = self.db.submit(kind, payload, idempotency_key=idempotency_key,
                             run_after=run_after, ordering_key=ordering_key, notify=False,
                             priority=priority, unique_while=unique_while,
                             unique_for=unique_for, debounce=debounce, depends_on=depends_on,
                             on_dependency_failure=on_dependency_failure,
                             concurrency_key=concurrency_key)
        self._signal([job])
        return job.id

    def submit_job(self, kind: str, payload: Any = None, *, idempotency_key: str | None = None,
                   run_after: datetime | None = None,
                   ordering_key: str | None = None,
                   priority: int | None = None, **scope) -> tuple[int, bool]:
        """``submit`` answering (id, created): created is false when ``idempotency_key``
        named an existing job, which is then returned as it is (and signalled only if it
        still waits for one)."""
        job, created = self.db.submit_created(kind, payload, idempotency_key=idempotency_key,
                                              run_after=run_after, ordering_key=ordering_key,
                                              priority=priority, **scope)
        self._signal([job])
        return job.id, created

    def submit_many(self, specs: Sequence[dict | tuple],
                    conn: psycopg.Connection | None = None) -> list[int]:
        """Submit many jobs in one transaction: each spec is a dict with ``kind`` and
        optionally ``payload``, ``idempotency_key``, ``run_after``, ``ordering_key``,
        ``priority``, ``unique_while``, ``unique_for``, ``debounce`` — or a
        ``(kind, payload)`` tuple. Returns ids in spec order. ``conn``: in the caller's
        transaction, as ``submit``."""
        if conn is not None:
            return [job.id for job in self.db.submit_many(
                [dict(s, notify=True) for s in self._normalised(specs)], conn=conn)]
        submitted = self.db.submit_many_signals(self._normalised(specs))
        # An idempotent repeat may be a finished job; a coordinator waits for its children.
        self._push([(job_id, queue, due, priority)
                    for job_id, queue, due, waits, priority in submitted if waits])
        return [row[0] for row in submitted]

    def fan_out(self, children: Sequence[dict | tuple], then: dict | tuple) -> int:
        """Submit children and a coordinator that becomes claimable once every child is
        terminal; returns the coordinator's id."""
        *kids, coordinator_spec = self._normalised([*children, then])
        coordinator = self.db.fan_out(kids, coordinator_spec)
        # fan_out returns only the coordinator, so the children's ids are unknown here:
        # reading them back with jobs.children is the one round trip (jobs.signals would
        # need the ids first, a second one). _signal applies jobs.signals' rule to the rows.
        self._signal(self.db.children(coordinator.id))
        return coordinator.id

    @staticmethod
    def _normalise(spec: dict | tuple, traceparent: str | None = None) -> dict:
        if isinstance(spec, tuple):
            spec = {"kind": spec[0], "payload": spec[1] if len(spec) > 1 else None}
        spec = dict(spec)
        kind = spec.pop("kind")
        payload = spec.pop("payload", None)
        spec.setdefault("traceparent", traceparent)
        return job_spec(kind, payload, notify=False, **spec)

    @staticmethod
    def _normalised(specs: Iterable[dict | tuple]) -> list[dict]:
        """Specs as jobs.submit_many takes them, under the caller's trace context (looked up
        once for the batch)."""
        traceparent = current_traceparent()
        return [Client._normalise(s, traceparent) for s in specs]

    def _signal(self, jobs: Iterable[Job]) -> None:
        # Only queued jobs are worth a signal: an idempotent repeat may return a finished
        # job, and a fan-in coordinator is woken by its last child instead.
        self._push([(j.id, j.queue, j.run_after, j.priority) for j in jobs
                    if j is not None and j.status == "queued" and not (j.pending_children or 0)])

    def _signal_ids(self, job_ids: Sequence[int]) -> None:
        """Push those of ``job_ids`` that wait for a signal. ``jobs.signals`` applies the same
        rule as ``_signal`` in PostgreSQL, for any number of ids in one round trip."""
        self._push(self.db.push_signals(job_ids))

    def _push(self, todo: list[tuple]) -> None:
        """One Redis pipeline for the whole batch; on failure park it for the reaper."""
        if not todo:
            return
        try:
            self.transport.push(todo)
        except redis.RedisError as exc:
            ids = [signal[0] for signal in todo]
            marked = self.db.mark_enqueue_failed(ids)
            jlog.event(logger, logging.WARNING, "enqueue_failed",
                       "Redis push failed after commit; parked as enqueue_failed for the reaper",
                       job_ids=ids[:20], count=len(ids), marked=marked, error=str(exc))

    # -- operating ------------------------------------------------------------------------
    def get(self, job_id: int) -> Job:
        return self.db.get(job_id)

    def events(self, job_id: int) -> list[Event]:
        return self.db.events(job_id)

    def children(self, job_id: int) -> list[Job]:
        return self.db.children(job_id)

    def dependencies(self, job_id: int) -> list[Neighbour]:
        """The jobs this one depends on, with each edge's policy and release."""
        return self.db.dependencies(job_id)

    def dependents(self, job_id: int) -> list[Neighbour]:
        """The jobs depending on this one."""
        return self.db.dependents(job_id)

    def cancel(self, job_id: int, reason: str = "cancelled") -> Outcome:
        outcome = self.db.cancel(job_id, reason)
        self._wake(outcome.wake)
        return outcome

    def replay(self, job_id: int) -> bool:
        """Re-drive a failed job; False (no-op) for a done one. ``jobs.replay`` does not
        signal, so the id is pushed here."""
        replayed = self.db.replay(job_id)
        if replayed:
            self._signal_ids([job_id])
        return replayed

    def replay_many(self, kind: str | None, *, error_like: str | None = None,
                    failed_since: datetime | None = None, max_jobs: int = 1000) -> list[int]:
        """Bulk dead-letter re-drive (``jobs.replay_many``, one transaction): up to
        ``max_jobs`` failed jobs of ``kind`` (None: every kind) whose error matches the LIKE
        pattern ``error_like`` and that failed at or after ``failed_since``, oldest failure
        first. Returns the re-queued ids, which are pushed here; call again for the rest."""
        requeued = self.db.replay_many(kind, error_like=error_like, failed_since=failed_since,
                                       max_jobs=max_jobs)
        ids = [s.job_id for s in requeued]
        if ids:
            self._signal_ids(ids)
        return ids

    # -- paused queues (docs/python.md) -----------------------------------------------------
    def pause(self, queue: str) -> bool:
        """Stop claims of ``queue``'s jobs (those running go on); True if it was running."""
        return self.db.pause(queue)

    def resume(self, queue: str, batch: int = 10_000) -> tuple[bool, int]:
        """Let ``queue``'s jobs be claimed again and signal up to ``batch`` of them at once
        (oldest first, each into its priority's band): ids popped in the moment before the workers saw the pause were
        refused and dropped. Returns (whether it was paused, jobs signalled). Anything not
        signalled here, or a lost push, the reaper's sweep signals once the lists drain."""
        changed = self.db.resume(queue)
        found = self.db.stale_queued(queue, 0.0, batch)
        self._push([s.push_tuple() for s in found])
        return changed, len(found)

    def _wake(self, wake: Sequence[int] | None) -> None:
        if wake:
            self._signal_ids(wake)

    # -- periodic jobs (docs/python.md, "Periodic jobs") ----------------------------------
    def schedule(self, name: str, cron: str, kind: str, payload: Any = None, *,
                 timezone: str = "UTC", missed: str = "once",
                 enabled: bool | None = None) -> dict:
        """Create or replace a periodic job (``jobs.schedule``); returns its row, with
        ``created``. The cron text is parsed here first: a bad one raises
        ``schedules.ScheduleError`` (a ValueError) before PostgreSQL is asked. ``enabled``
        None keeps the stored value (true for a new schedule)."""
        from . import schedules

        return schedules.define(self.db, name, cron, kind, payload, timezone_name=timezone,
                                missed=missed, enabled=enabled)

    def unschedule(self, name: str) -> bool:
        """Delete a periodic job: False when there was none. Its jobs stay."""
        from . import schedules

        return schedules.remove(self.db, name)

    def schedules(self) -> list[dict]:
        """Every periodic job by name, with ``last_tick``, ``last_job_id`` and ``next_tick``."""
        from . import schedules

        return schedules.listing(self.db)

    def status_counts(self, job_ids: Sequence[int]) -> dict[str, int]:
        return self.db.status_counts(job_ids)

    def wait(self, job_id: int, timeout: float = 30.0, interval: float = 0.1) -> Job:
        """Poll until the job is terminal; raises TimeoutError with the last state."""
        deadline = time.monotonic() + timeout
        while True:
            job = self.db.get(job_id)
            if job.status in TERMINAL:
                return job
            if time.monotonic() >= deadline:
                raise TimeoutError(f"job {job_id} still {job.status} after {timeout}s")
            time.sleep(interval)
