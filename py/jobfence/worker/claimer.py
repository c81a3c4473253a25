"""Claiming: pop ids from Redis and claim them in PostgreSQL, a batch per round trip.

How many ids one pop asks for is bounded by the claim budget, not by idle handlers: up to
``concurrency + prefetch`` jobs may be claimed and not yet returned by their handler. Jobs
waiting for a handler are heartbeated like running ones; their timeout runs from the claim,
which is why the prefetch is bounded: by default one whole batch waits while the one before
it runs (``core.default_prefetch``). While jobs are in flight the
claimer waits for room for half a batch rather than claiming a remainder: a worker with a
backlog then claims full batches instead of alternating 100 and 32.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import psycopg
import redis

from ..app import Context
from ..errors import JobfenceError
from ..observe import process as metrics
from ..rows import Lease
from ..transport import WrongType
from ..retry import Backoff
from .common import Host, Job, LeaseClock, describe, event, logger, sqlstate
from .misses import MissReport


MOVE_DUE_EVERY = 0.5
# How often the paused queues are read: a paused queue is left out of the pops, so its ids
# wait in Redis for the resume instead of being popped and refused. The queues holding keyed
# jobs are read as often: there the popped ids are tokens for a fair claim.
PAUSES_EVERY = 1.0


def _is_utf8(name: str) -> bool:
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


class Claimer:
    def __init__(self, worker: Host):
        self.w = worker
        self.db = worker.db
        self.claimed = 0  # written by this thread only
        self.freed = threading.Event()  # set by the reporter's flush once handlers returned
        # Paces the loop after claims that failed for reasons other than a lost server.
        self._claim_backoff = Backoff(first=0.5, cap=5.0)
        self._loggers: dict[str, logging.Logger] = {}
        self.paused: frozenset[str] = frozenset()
        # Queues holding queued jobs with a concurrency key: their popped ids are claim
        # tokens (jobs.claim_next), so a key with a large backlog cannot starve the others.
        self.keyed: frozenset[str] = frozenset()
        self._pauses_read_at = float("-inf")
        self.misses = MissReport(worker.name)
        # The queues as PostgreSQL can name them: a --queue that is not UTF-8 (kept as lone
        # surrogates) has no jobs there, and would fail every claim's encoding.
        self.sql_queues = [q for q in worker.queues if _is_utf8(q)]
        # Unix time the loop last went round: a health check reads it, because a metrics
        # page that answers proves only that its HTTP thread lives.
        self.looped_at = time.time()

    def active(self) -> int:
        """Jobs claimed whose handler has not returned yet (waiting or running)."""
        return self.claimed - self.w.reporter.returned

    def run(self) -> None:
        w = self.w
        backoff = Backoff()
        next_move = 0.0
        while not w.stopping():
            self.looped_at = time.time()
            active = self.active()
            room = min(w.batch, w.capacity - active)
            # A sliver of room while jobs are in flight is left to grow: right after a full
            # batch is dispatched, the budget has room for only its remainder, and claiming
            # that would halve every round trip's batch. Handlers free a batch's worth soon.
            if room <= 0 or (active > 0 and room < min(w.batch, w.capacity) // 2):
                self.freed.wait(0.2)
                self.freed.clear()
                continue
            try:
                now = time.monotonic()
                if now >= next_move:
                    # Retries wait in the delayed set; moving the due ones here too keeps
                    # backoff precise without waiting for the reaper's next tick.
                    for q in w.queues:
                        self._move_due(q)
                    next_move = now + MOVE_DUE_EVERY
                queues = self._serving(now)
                if not queues:
                    w.wait_stop(w.pop_timeout)
                    continue
                ids = w.transport.pop(queues, room, w.pop_timeout)
                backoff.reset()
                metrics.REDIS.ok()
            except redis.RedisError as exc:
                metrics.REDIS.failed()
                delay = backoff.next()
                event(logging.WARNING, "redis_unavailable", f"cannot pop; retrying in {delay:.1f}s",
                      error=str(exc), worker=w.name)
                w.wait_stop(delay)
                continue
            if not ids:
                continue
            if w.stopping():
                self._give_back(ids)
                return
            try:
                self.claim_and_start(list(dict.fromkeys(ids)))
            except Exception as exc:  # noqa: BLE001 - a crash loop would stall every queue
                # Last line of defence: the popped ids are only signals. PostgreSQL still
                # holds the jobs and the reaper re-pushes them; keep serving the rest.
                delay = self._claim_backoff.next()
                logger.error(f"unexpected error after a pop; signals dropped, retrying in "
                             f"{delay:.1f}s", exc_info=True,
                             extra={"event": "worker_error",
                                    "fields": {"worker": w.name, "job_ids": ids[:20],
                                               "error": f"{type(exc).__name__}: {exc}"}})
                w.wait_stop(delay)

    def _serving(self, now: float) -> list[str]:
        """The worker's queues less the paused ones, read at most every PAUSES_EVERY. If the
        read fails the last answer stands: the claims refuse a paused queue's jobs anyway."""
        if now - self._pauses_read_at >= PAUSES_EVERY:
            self._pauses_read_at = now
            self._read_pauses()
            self._read_keyed()
        return [q for q in self.w.queues if q not in self.paused]

    def _read_keyed(self) -> None:
        """If the read fails the last answer stands: either way every popped id is claimed
        or signalled again, only the order between keys may be less fair for a second."""
        try:
            self.keyed = frozenset(self.db.keyed_queues(self.sql_queues))
        except (psycopg.Error, JobfenceError) as exc:
            event(logging.DEBUG, "keyed_queues_unread", "could not read the queues holding "
                  "keyed jobs", error=str(exc), worker=self.w.name)

    def _read_pauses(self) -> None:
        try:
            paused = frozenset(r["queue"] for r in self.db.paused_queues())
        except (psycopg.Error, JobfenceError) as exc:
            event(logging.DEBUG, "pauses_unread", "could not read the paused queues",
                  error=str(exc), worker=self.w.name)
        else:
            if paused != self.paused:
                changed = sorted(paused.symmetric_difference(self.paused) & set(self.w.queues))
                if changed:
                    event(logging.INFO, "queues_paused", "paused queues changed",
                          paused=sorted(paused & set(self.w.queues)), changed=changed,
                          worker=self.w.name)
                self.paused = paused

    def _move_due(self, queue: str) -> None:
        try:
            self.w.transport.move_due(queue)
        except WrongType as exc:
            # One corrupt key must not stop the pops of every queue this worker serves: the
            # reaper deletes it, and the stale re-push signals what it held back meanwhile.
            self.w.transport.warnings.warn(
                "redis_key_skipped", f"cannot move the due ids of queue {queue!r}; skipped "
                "until the key is repaired", exc.key, exc, queue=queue, worker=self.w.name)

    def _give_back(self, ids: list[int]) -> None:
        """Ids popped as the stop came in: a stopping worker takes no new work. They go back
        to the head of the list they came from (their queue and priority band)."""
        try:
            if self.w.transport.give_back(ids):
                return
            error = "no list to give them back to"
        except redis.RedisError as exc:
            error = str(exc)
        # Only signals: PostgreSQL keeps the jobs queued and the stale sweep re-pushes them.
        event(logging.INFO, "signals_dropped_at_stop", "stopping: left popped ids to the "
              "stale sweep", job_ids=ids[:50], error=error, worker=self.w.name)

    def claim_and_start(self, ids: list[int]) -> None:
        w = self.w
        # In a queue holding keyed jobs the popped ids are tokens: as many jobs are claimed
        # as ids were popped, chosen by jobs.claim_next (the keys take turns), and the
        # popped ids passed over get their signals back (_signal_missed).
        queue = w.transport.last_queue
        fair = queue is not None and queue in self.keyed
        backoff = Backoff()
        pause = 0.0
        while True:
            try:
                if fair:
                    leases = self.db.claim_next_leases(w.name, [queue], len(ids))
                else:
                    leases = self.db.claim_leases(ids, w.name, self.sql_queues)
                self._claim_backoff.reset()
                metrics.POSTGRES.ok()
                break
            except psycopg.OperationalError as exc:
                metrics.POSTGRES.failed()
                if w.stopping():
                    return  # the ids stay queued in PostgreSQL: the reaper re-pushes them
                delay = backoff.next()
                event(logging.WARNING, "db_unavailable", f"claim failed; retrying in {delay:.1f}s",
                      error=str(exc), job_ids=ids[:20], worker=w.name)
                w.wait_stop(delay)
            except (psycopg.Error, JobfenceError) as exc:
                # By id, one at a time, whichever claim failed: a poison job fails alone.
                leases, pause = self._claim_isolating(ids, exc)
                fair = False
                break
        if leases:
            self.start(leases)
        if fair or len(leases) < len(ids):
            given_back = self._signal_missed(ids, leases, give_back=fair)
            if given_back and not leases and not pause:
                # Nothing claimable was left for the tokens (another worker took it, or the
                # queue was paused): wait as an empty pop would instead of spinning on them.
                pause = w.pop_timeout
        if pause:
            # After starting what was claimed: its lease clock is already running.
            w.wait_stop(pause)

    def _signal_missed(self, ids: list[int], leases: list[Lease], give_back: bool) -> bool:
        """Ids a claim did not grant have lost their signal. Most were simply not claimable
        (a duplicate, a job already done); those a kind's global limit held back are pushed
        again, delayed until the limit may let them through, else nothing would wake them
        while the queue stays busy. After a fair claim (``give_back``) the other ids still
        claimable (passed_over: other jobs were chosen for their tokens) go back to the head
        of their list. The rest are counted by cause, and ids of no job here or of another
        queue's job warned about. One more round trip, only when something was not granted.
        True if ids were given back."""
        granted = {lease.job_id for lease in leases}
        missing = [i for i in ids if i not in granted]
        if not missing:
            return False
        try:
            held, causes = self.db.missed(missing, self.sql_queues)
            self.misses.record(causes)
            if held:
                self.w.transport.push([s.push_tuple() for s in held])
            if give_back:
                passed_over = set(causes.get("passed_over", ())) - {s.job_id for s in held}
                back = [i for i in missing if i in passed_over]
                return bool(back) and self.w.transport.give_back(back)
        except (psycopg.Error, JobfenceError, redis.RedisError) as exc:
            # Still queued in PostgreSQL: the reaper's stale sweep signals them later.
            event(logging.WARNING, "held_back_unsignalled", "could not signal again the "
                  "popped jobs a claim did not grant; the reaper's sweep will",
                  error=str(exc), job_ids=missing[:20], worker=self.w.name)
        return False

    def start(self, leases: list[Lease]) -> None:
        w = self.w
        clock = LeaseClock()
        tasks = w.app.tasks
        held = w.held
        name = w.name
        debug = logger.isEnabledFor(logging.DEBUG)
        progress = self._progress  # one bound method for the batch, not one per job
        jobs = []
        for lease in leases:
            task = tasks.get(lease.kind)
            ctx = Context(lease, name, self._logger(lease.kind), progress=progress)
            job = Job(lease, task, ctx, clock)
            held[lease.job_id] = job
            jobs.append(job)
            if debug:
                event(logging.DEBUG, "claimed", "job claimed", queue=lease.queue,
                      attempt=lease.attempt, **job.fields(name))
        self.claimed += len(jobs)
        if w.tracer is not None:
            w.tracer.begin(jobs, self._trace_contexts([lease.job_id for lease in leases]))
        w.dispatch(jobs)

    def _trace_contexts(self, ids: list[int]) -> dict[int, str]:
        """The producers' trace contexts of a claimed batch: one round trip, only when the
        worker traces. Without them the spans still start, unlinked."""
        try:
            return self.db.trace_contexts(ids)
        except (psycopg.Error, JobfenceError) as exc:
            event(logging.WARNING, "trace_contexts_unread", "could not read the jobs' trace "
                  "contexts; their spans start without links", error=str(exc),
                  job_ids=ids[:20], worker=self.w.name)
            return {}

    def _progress(self, lease: Lease, value: Any):
        """ctx.progress, from the handler's own thread: one jobs.progress call."""
        return self.w.db.progress_lease(lease, self.w.name, value)

    def _logger(self, kind: str) -> logging.Logger:
        found = self._loggers.get(kind)
        if found is None:
            found = self._loggers[kind] = logging.getLogger(f"jobfence.task.{kind}")
        return found

    def _claim_isolating(self, ids: list[int], exc: Exception) -> tuple[list[Lease], float]:
        """claim_many raised a server error that retrying will not cure (e.g. 22008 from a
        job whose intervals overflow a timestamp). Claim the ids one at a time so one bad
        job does not take its batch-mates down with it, drop the signals of those that
        still fail (PostgreSQL keeps the jobs; the reaper's stale re-push brings them back),
        and back off briefly (the returned pause) so a poison job cannot become a hot loop."""
        w = self.w
        event(logging.ERROR, "claim_failed", f"claim_many failed for {len(ids)} id(s): "
              f"{describe(exc)}", sqlstate=sqlstate(exc), error=str(exc).strip()[:2000],
              job_ids=ids[:50], worker=w.name)
        leases: list[Lease] = []
        dropped: dict[int, str | None] = {}
        if len(ids) > 1:
            for pos, job_id in enumerate(ids):
                try:
                    leases += self.db.claim_leases([job_id], w.name, self.sql_queues)
                except psycopg.OperationalError:
                    dropped.update((i, None) for i in ids[pos:])  # server away: reaper re-pushes
                    break
                except (psycopg.Error, JobfenceError) as single:
                    dropped[job_id] = sqlstate(single)
        else:
            dropped = {ids[0]: sqlstate(exc)}
        if dropped:
            delay = self._claim_backoff.next()
            event(logging.ERROR, "signals_dropped",
                  f"dropped the signals of {len(dropped)} job(s) that cannot be claimed; "
                  f"they stay in PostgreSQL and the reaper re-pushes them; pausing "
                  f"{delay:.1f}s", job_ids=list(dropped)[:50],
                  sqlstates=sorted({s for s in dropped.values() if s}) or None, worker=w.name)
            return leases, delay
        self._claim_backoff.reset()
        return leases, 0.0
