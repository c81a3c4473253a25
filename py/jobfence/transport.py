"""Redis transport: job ids only. Everything here can be lost without losing a job, because
PostgreSQL can rebuild it (the reaper re-pushes claimable jobs when a ready list is empty)."""

from __future__ import annotations

import logging
import re
import time
from collections import defaultdict
from typing import Iterable, Sequence

import redis

from . import log as jlog

logger = logging.getLogger("jobfence.transport")

# Job ids are PostgreSQL bigint identities: 1 .. 2^63-1, written by str(int).
MAX_JOB_ID = 2**63 - 1
_ID = re.compile(rb"[1-9][0-9]{0,18}")


def parse_job_id(raw: bytes | str | int) -> int | None:
    """The job id a ready-list entry names, or None for anything that is not a positive
    64-bit integer in canonical decimal form (junk must never reach jobs.claim_many)."""
    if isinstance(raw, int) and not isinstance(raw, bool):
        return raw if 1 <= raw <= MAX_JOB_ID else None
    if isinstance(raw, str):
        raw = raw.encode("utf-8", "replace")
    if not isinstance(raw, bytes) or not _ID.fullmatch(raw):
        return None
    value = int(raw)
    return value if value <= MAX_JOB_ID else None

# The ready list is a FIFO: producers LPUSH, workers pop from the right.
# Moving due ids must be atomic so that several reapers (and workers) never move one twice.
_MOVE_DUE = """
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
if #ids > 0 then
  redis.call('ZREM', KEYS[1], unpack(ids))
  redis.call('LPUSH', KEYS[2], unpack(ids))
end
return #ids
"""


def ready_key(queue: str) -> str:
    # The braces are literal: a Redis Cluster hash tag keeping a queue's keys in one slot.
    return f"jobfence:{{{queue}}}:ready"


def delayed_key(queue: str) -> str:
    return f"jobfence:{{{queue}}}:delayed"


def _epoch(run_after) -> float | None:
    if run_after is None:
        return None
    return run_after.timestamp() if hasattr(run_after, "timestamp") else float(run_after)


def fill_pipeline(pipe, signals: Iterable[tuple[int, str, object]]) -> int:
    """Queue the commands pushing (job_id, queue, run_after) triples on a pipeline (sync or
    asyncio): due ids to the ready list, later ones to the delayed set."""
    now = time.time()
    ready: dict[str, list[str]] = defaultdict(list)
    delayed: dict[str, dict[str, float]] = defaultdict(dict)
    count = 0
    for job_id, queue, run_after in signals:
        at = _epoch(run_after)
        if at is None or at <= now:
            ready[queue].append(str(job_id))
        else:
            delayed[queue][str(job_id)] = at
        count += 1
    for queue, ids in ready.items():
        pipe.lpush(ready_key(queue), *ids)
    for queue, members in delayed.items():
        pipe.zadd(delayed_key(queue), members)
    return count


class Transport:
    """Push, pop and move job ids. Every method may raise ``redis.RedisError``; callers decide
    whether that is worth a retry (a worker) or a ``mark_enqueue_failed`` (a producer)."""

    def __init__(self, url: str, *, socket_timeout: float = 5.0):
        self.url = url
        self.redis = redis.Redis.from_url(
            url, socket_timeout=socket_timeout, socket_connect_timeout=2.0,
            health_check_interval=30)
        self._move_due = self.redis.register_script(_MOVE_DUE)

    def close(self) -> None:
        self.redis.close()

    def ping(self) -> bool:
        return bool(self.redis.ping())

    def push(self, signals: Iterable[tuple[int, str, object]]) -> int:
        """Push (job_id, queue, run_after) triples: due ids to the ready list, later ones to
        the delayed set scored by run_after epoch. One round trip."""
        pipe = self.redis.pipeline(transaction=False)
        count = fill_pipeline(pipe, signals)
        if count:
            pipe.execute()
        return count

    def push_ids(self, queue: str, job_ids: Sequence[int]) -> int:
        return self.push((i, queue, None) for i in job_ids)

    def pop(self, queues: Sequence[str], count: int, timeout: float) -> list[int]:
        """Block up to ``timeout`` seconds for up to ``count`` ids from the first non-empty
        ready list. The short timeout keeps shutdown prompt."""
        keys = [ready_key(q) for q in queues]
        found = self.redis.blmpop(timeout, len(keys), *keys, direction="RIGHT", count=count)
        if not found:
            return []
        key, ids = found
        out, junk = [], []
        for raw in ids:
            job_id = parse_job_id(raw)
            if job_id is None:
                junk.append(raw)  # not a job: dropping it loses nothing
            else:
                out.append(job_id)
        if junk:
            key = key.decode("utf-8", "replace") if isinstance(key, bytes) else key
            jlog.event(logger, logging.WARNING, "junk_signals_dropped",
                       "discarded ready-list entries that are not job ids (positive 64-bit "
                       "integers)", key=key, count=len(junk),
                       sample=[repr(j)[:40] for j in junk[:5]])
        return out

    def move_due(self, queue: str, limit: int = 1000) -> int:
        return int(self._move_due(keys=[delayed_key(queue), ready_key(queue)],
                                  args=[time.time(), limit]))

    def ready_length(self, queue: str) -> int:
        return int(self.redis.llen(ready_key(queue)))
