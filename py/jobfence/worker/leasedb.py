"""The worker's lease calls: every claim hands out a lease token and every heartbeat,
completion and failure presents it (``jobs.*`` forms ``*_with_token``), so the server accepts
a write only from the holder of the lease, whether or not it requires tokens.

Items are the ``Lease`` rows the claim returned: they carry (job_id, lease_version, token),
so a caller cannot pair a fence with the wrong token. One statement per batch, as in
``jobfence.db``.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Sequence

import psycopg
from psycopg.rows import tuple_row
from psycopg.types.json import Jsonb

from .. import rows, sql
from ..arrays import BigintArray, JsonbArray, UuidArray
from ..db import Database
from ..errors import translate
from ..rows import Lease


def _jsonb(value: Any) -> Jsonb | None:
    """A value as a jsonb parameter; one already wrapped (the executor's results, encoded
    once where they were checked) goes as it is."""
    if value is None or isinstance(value, Jsonb):
        return value
    return Jsonb(value)


# What a completion says when it says nothing more: accepted, done, no job woken. The
# server leaves these out of the answer (sql.COMPLETE_MANY_WITH_TOKEN_UNUSUAL); job_id 0
# because one object stands for every such item (read the item's own lease for its id).
COMPLETED = rows.Outcome(job_id=0, accepted=True, status="done", run_after=None, wake=None)


def _unusual(found: Sequence[tuple]) -> dict[int, rows.Outcome]:
    return {item - 1: rows.Outcome(job_id, accepted, status, run_after, wake)
            for item, job_id, accepted, status, run_after, wake in found}


def _fences(leases: Sequence[Lease]) -> dict:
    """The job ids, lease versions and tokens of ``leases``, as the arrays the
    ``*_many_with_token`` statements take, each dumped whole (jobfence.arrays)."""
    return {"job_ids": BigintArray([lease.job_id for lease in leases]),
            "lease_versions": BigintArray([lease.lease_version for lease in leases]),
            "tokens": UuidArray([lease.token for lease in leases])}


def _complete_params(items: Sequence[tuple[Lease, Any]], worker: str) -> dict:
    results = JsonbArray([_jsonb(result) for _, result in items])
    # No result at all (the usual no-op or fire-and-forget job): NULL stands for an array
    # of NULLs (jobs.complete_many), with no element to encode.
    if results.count(None) == len(results):
        results = None
    return {**_fences([lease for lease, _ in items]), "worker": worker, "results": results}


def _fail_params(items: Sequence[tuple[Lease, str, bool]], worker: str) -> dict:
    return {**_fences([lease for lease, _, _ in items]), "worker": worker,
            "errors": [error for _, error, _ in items],
            "retryable": [bool(retry) for _, _, retry in items]}


class LeaseDatabase(Database):
    """``Database`` plus the token-carrying lease calls the worker makes."""

    def claim_leases(self, job_ids: Sequence[int], worker: str,
                     queues: Sequence[str] | None = None) -> list[Lease]:
        """Leases (with tokens) for those of ``job_ids`` claimable now and, given
        ``queues``, in one of the worker's queues: an id another queue's job has is a no-op."""
        return self._all(sql.CLAIM_MANY_WITH_TOKEN, {
            "job_ids": BigintArray(job_ids), "worker": worker,
            "queues": None if queues is None else list(queues)}, rows.LEASE)

    def claim_next_leases(self, worker: str, queues: Sequence[str], max_jobs: int) -> list[Lease]:
        """Up to ``max_jobs`` leases (with tokens) of the jobs of ``queues`` claimable now,
        the concurrency keys taking turns (``jobs.claim_next_with_token``)."""
        return self._all(sql.CLAIM_NEXT_WITH_TOKEN, {
            "worker": worker, "queues": list(queues), "max_jobs": max_jobs}, rows.LEASE)

    def trace_contexts(self, job_ids: Sequence[int]) -> dict[int, str]:
        """job id -> the W3C traceparent it was submitted under (jobs without one left out)."""
        return dict(self._all(sql.TRACE_CONTEXTS, {"job_ids": list(job_ids)}, tuple_row))

    def beat_leases(self, leases: Sequence[Lease], worker: str) -> list[rows.Beat]:
        """One row per lease, never waiting on a row lock (``jobs.heartbeat_many``)."""
        return self._all(sql.HEARTBEAT_MANY_WITH_TOKEN, {**_fences(leases), "worker": worker},
                         rows.BEAT)

    def complete_lease(self, lease: Lease, worker: str, result: Any = None,
                       conn: psycopg.Connection | None = None) -> rows.Outcome:
        """``jobs.complete``; on ``conn`` (the handler's transaction) when given."""
        params = {"job_id": lease.job_id, "worker": worker, "lease_version": lease.lease_version,
                  "result": _jsonb(result), "token": lease.token}
        if conn is not None:
            return self.run(conn, sql.COMPLETE_WITH_TOKEN, params, rows.OUTCOME)[0]
        return self._one(sql.COMPLETE_WITH_TOKEN, params, rows.OUTCOME)

    def complete_leases(self, items: Sequence[tuple[Lease, Any]], worker: str) -> dict[int, rows.Outcome]:
        """items: (lease, result). The outcomes other than ``COMPLETED`` (accepted, done,
        nothing woken), by item index from 0; an item left out is ``COMPLETED``."""
        return _unusual(self._all(sql.COMPLETE_MANY_WITH_TOKEN_UNUSUAL,
                                  _complete_params(items, worker), tuple_row))

    def fail_leases(self, items: Sequence[tuple[Lease, str, bool]], worker: str) -> list[rows.Outcome]:
        """items: (lease, error, retryable); one outcome per item, in order."""
        return self._all(sql.FAIL_MANY_WITH_TOKEN, _fail_params(items, worker), rows.OUTCOME)

    def snooze_leases(self, items: Sequence[tuple[Lease, float]], worker: str) -> list[rows.Outcome]:
        """items: (lease, delay in seconds); one outcome per item, in order."""
        return self._all(sql.SNOOZE_MANY_WITH_TOKEN, {
            **_fences([lease for lease, _ in items]), "worker": worker,
            "delays": [timedelta(seconds=delay) for _, delay in items]}, rows.OUTCOME)

    def progress_lease(self, lease: Lease, worker: str, progress: Any) -> rows.Heartbeat:
        """``jobs.progress``: store the job's progress; extends the lease like a heartbeat."""
        return self._one(sql.PROGRESS_WITH_TOKEN, {
            "job_id": lease.job_id, "worker": worker, "lease_version": lease.lease_version,
            "progress": _jsonb(progress), "token": lease.token}, rows.HEARTBEAT)

    def finish_leases(self, completions: Sequence[tuple[Lease, Any]],
                      failures: Sequence[tuple[Lease, str, bool]],
                      worker: str) -> tuple[dict[int, rows.Outcome], list[rows.Outcome]]:
        """``complete_leases`` and ``fail_leases`` in one round trip (pipeline mode), each
        still its own transaction. If the server refuses either, the error is raised and
        neither answer is returned: report them apart to find the culprit."""
        with self.connection() as conn:
            try:
                with conn.pipeline():
                    done = conn.cursor(row_factory=tuple_row)
                    done.execute(sql.COMPLETE_MANY_WITH_TOKEN_UNUSUAL, _complete_params(completions, worker))
                    failed = conn.cursor(row_factory=rows.OUTCOME)
                    failed.execute(sql.FAIL_MANY_WITH_TOKEN, _fail_params(failures, worker))
                return _unusual(done.fetchall()), failed.fetchall()
            except psycopg.Error as exc:
                mapped = translate(exc)
                if mapped is exc:
                    raise
                raise mapped from None
