"""The audit's Redis side (check ``signalled``): every job a worker could claim now, whose
row was last written and which became due longer ago than the resignal bound, has its id in
its queue's ready list or delayed set.

The bound is the reaper's ``--stale-after`` plus two of its ``--interval``: a signal lost
later than that should have been re-pushed by a reaper tick (``jobs.stale_queued``) by now.

Memory stays bounded whatever the backlog: PostgreSQL's side is streamed through a
server-side cursor in id order, the ready list is read in ``LRANGE`` slices kept as sorted
runs of 8-byte ids and merged against that stream, and the delayed set is asked with
pipelined ``ZSCORE`` only for the ids the ready list lacks. Reading the ready list before
PostgreSQL means a job popped and claimed meanwhile is no longer claimable when PostgreSQL is
read, so it is not reported; an id that moved from the delayed set to the ready list between
the two reads, or a job claimed between its pop and its claim, could be, so every id found
missing is looked for once more, from scratch, and reported only if it is missing again.
"""

from __future__ import annotations

import heapq
from array import array
from bisect import bisect_left
from datetime import timedelta
from typing import Iterator

import psycopg
import redis

from . import sql
from .transport import _raw, delayed_keys, is_corruption, parse_job_id, ready_keys

CHUNK = 5000            # ids per LRANGE slice, cursor fetch and ZSCORE pipeline
EVERY_JOB = 2**31 - 1   # stale_queued's max_jobs: all of them, streamed
CHECK = "signalled"


def resignal_bound(stale_after: float, reaper_interval: float) -> float:
    return stale_after + 2 * reaper_interval


def description(bound: float) -> str:
    return (f"every claimable job untouched and due for over {bound:g} s has its id in its "
            "queue's Redis ready list or delayed set")


def _contains(ids: array, job_id: int) -> bool:
    at = bisect_left(ids, job_id)
    return at < len(ids) and ids[at] == job_id


def _ready_runs(client: redis.Redis, queue: str, only: array | None, namespace: str) -> list[array]:
    """The ready list's ids as sorted runs, one per slice (``only``: keep just those ids).
    Slices are read from the head while producers push there: a push between two slices
    shifts ids into the next one and reads them twice, which is harmless; pops at the tail
    shift nothing that is still to be read. A key of another type holds no signal a worker
    can pop: read as empty. Every priority band's list is read."""
    runs = []
    for key in map(_raw, ready_keys(queue, namespace)):
        start = 0
        while True:
            try:
                raw = client.lrange(key, start, start + CHUNK - 1)
            except redis.ResponseError as exc:
                if is_corruption(exc):
                    break
                raise
            ids = [i for i in map(parse_job_id, raw) if i is not None and (only is None or _contains(only, i))]
            if ids:
                runs.append(array("q", sorted(ids)))
            if len(raw) < CHUNK:
                break
            start += CHUNK
    return runs


def _stale(conn: psycopg.Connection, queue: str, bound: float) -> Iterator[list[int]]:
    """jobs.stale_queued(queue, bound) in id order, CHUNK ids at a time, in one snapshot."""
    with conn.cursor(name="jobfence_audit_stale") as cur:
        cur.itersize = CHUNK
        cur.execute(sql.STALE_QUEUED, {"queue": queue, "older_than": timedelta(seconds=bound),
                                       "max_jobs": EVERY_JOB})
        while True:
            rows = cur.fetchmany(CHUNK)
            if not rows:
                return
            yield [r[0] for r in rows]


def _delayed(client: redis.Redis, queue: str, ids: list[int], namespace: str) -> list[bool]:
    """Whether each id is in one of the queue's delayed sets (any priority band)."""
    keys = [_raw(k) for k in delayed_keys(queue, namespace)]
    pipe = client.pipeline(transaction=False)
    for job_id in ids:
        for key in keys:
            pipe.zscore(key, str(job_id))
    answers = pipe.execute(raise_on_error=False)
    found = []
    for at in range(0, len(answers), len(keys)):
        there = False
        for answer in answers[at:at + len(keys)]:
            if isinstance(answer, Exception) and not is_corruption(answer):
                raise answer
            there = there or (not isinstance(answer, Exception) and answer is not None)
        found.append(there)
    return found


def _missing(client: redis.Redis, conn: psycopg.Connection, queue: str, bound: float, namespace: str,
             only: array | None = None) -> array:
    """Ids of the queue's stale claimable jobs found in neither key (``only``: among those)."""
    ready = heapq.merge(*_ready_runs(client, queue, only, namespace))
    head = next(ready, None)
    out = array("q")
    try:
        for chunk in _stale(conn, queue, bound):
            lacking = []
            for job_id in chunk:
                if only is not None and not _contains(only, job_id):
                    continue
                while head is not None and head < job_id:
                    head = next(ready, None)
                if head != job_id:
                    lacking.append(job_id)
            if lacking:
                out.extend(i for i, there in zip(lacking, _delayed(client, queue, lacking, namespace)) if not there)
    finally:
        conn.rollback()  # read-only; the next pass takes a fresh snapshot and now()
    return out


def check_signals(database_url: str, client: redis.Redis, bound: float, examples: int) -> dict:
    """The ``signalled`` row, shaped like a jobs.audit row. Raises redis.RedisError when Redis
    cannot be read and psycopg.Error when PostgreSQL cannot."""
    count, sample = 0, []
    with psycopg.connect(database_url, connect_timeout=3, application_name="jobfence-audit") as conn:
        queues = [r[0] for r in conn.execute(sql.QUEUES).fetchall()]
        namespace = conn.execute(sql.REDIS_NAMESPACE).fetchone()[0]
        conn.rollback()
        for queue in queues:
            first = _missing(client, conn, queue, bound, namespace)
            if not first:
                continue
            confirmed = _missing(client, conn, queue, bound, namespace, only=first)
            count += len(confirmed)
            sample = sorted(sample + list(confirmed[:examples]))[:examples]
    return {"check_name": CHECK, "violations": count, "example_job_ids": sample,
            "description": description(bound)}
