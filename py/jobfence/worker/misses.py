"""What the worker does with the ids a claim did not grant: counts them by cause
(``jobfence_worker_unclaimed_ids``) and, for the two causes that are not the everyday
duplicate signal, writes one warning a minute per cause with how many ids it covers."""

from __future__ import annotations

import logging

from .. import log as jlog
from ..observe import process as metrics
from .common import event

WARN_EVERY = 60.0

# Why an id the worker popped may name no job of its queues, and what to do about it.
LIKELY = {
    "unknown": ("popped ids of jobs this database does not have: another deployment probably "
                "shares this Redis database (give each its own: docs/scaling.md), or the "
                "database was restored without flushing Redis"),
    "other_queue": ("popped ids of another queue's jobs: something with write access to Redis "
                    "pushed them into this worker's ready lists; they were not claimed"),
}


class MissReport:
    def __init__(self, worker_name: str, every: float = WARN_EVERY):
        self.worker_name = worker_name
        self._tally = jlog.Tally(every)

    def record(self, causes: dict[str, list[int]]) -> None:
        for cause, ids in causes.items():
            metrics.UNCLAIMED.labels(cause).inc(len(ids))
            why = LIKELY.get(cause)
            if why is None:
                continue
            count = self._tally.add(cause, len(ids))
            if count is None:
                continue
            event(logging.WARNING, f"unclaimed_{cause}", f"{why} ({count} since the last line)",
                  cause=cause, count=count, job_ids=ids[:20], worker=self.worker_name)
