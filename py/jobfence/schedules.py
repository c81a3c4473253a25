"""Periodic jobs: the calls that define schedules, and the ticker the reaper runs.

PostgreSQL keeps each schedule's position (``ticked_through``: every tick at or before it is
handled) and enqueues a tick exactly once (``jobs.enqueue_tick``: a row lock and an
idempotency key), so any number of reapers may tick at once. What is left here is what SQL
cannot do well: reading the cron text (cronsim) in the schedule's time zone, against the
database's clock.

Missed ticks (docs/sql-api.md, "schedule"): of the ticks due since ``ticked_through``, only
the latest is ever enqueued. With ``missed = 'once'`` it always is; with ``'skip'`` only while
it is at most ``late_after`` old (``max(60 s, 3 × the reaper's interval)``): older, it counts
as missed during downtime and the schedule resumes with its next tick.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta, timezone
from typing import Any, Callable
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import psycopg
from cronsim import CronSim, CronSimError
from psycopg.types.json import Jsonb

from . import log as jlog
from . import sql
from .errors import JobfenceError
from .rows import Signal

logger = logging.getLogger("jobfence.schedules")

MISSED_POLICIES = ("once", "skip")
CRON_HINT = ("5 fields (minute hour day-of-month month day-of-week) or 6 with seconds first, "
             "e.g. '*/5 * * * *', '0 3 * * MON', '*/10 * * * * *'")
LATE_AFTER_MIN = 60.0


class ScheduleError(ValueError):
    """A schedule the drivers refuse before PostgreSQL sees it (a cron text cronsim cannot
    read, a time zone this machine does not know, an unknown missed policy)."""


def zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, TypeError):
        raise ScheduleError(f"timezone {name!r} is not a time zone name (e.g. 'UTC', "
                            "'Europe/Paris')") from None


def check(cron: str, timezone_name: str = "UTC", missed: str = "once") -> str:
    """The cron text, single-spaced, if the ticker will be able to read it; else
    ScheduleError naming what is wrong."""
    if not isinstance(cron, str) or not cron.split():
        raise ScheduleError(f"cron must be a cron text: {CRON_HINT}")
    tz = zone(timezone_name)
    try:
        next(CronSim(cron, datetime.now(tz)))
    except CronSimError as exc:
        raise ScheduleError(f"cron {cron!r}: {exc}; {CRON_HINT}") from None
    except StopIteration:
        raise ScheduleError(f"cron {cron!r} never fires") from None
    if missed not in MISSED_POLICIES:
        raise ScheduleError(f"missed must be one of {', '.join(MISSED_POLICIES)}, got {missed!r}")
    return " ".join(cron.split())


def next_after(cron: str, tz: ZoneInfo, instant: datetime) -> datetime:
    """The first tick strictly after ``instant``, in UTC."""
    return next(CronSim(cron, instant.astimezone(tz))).astimezone(timezone.utc)


def latest_at_or_before(cron: str, tz: ZoneInfo, instant: datetime) -> datetime:
    """The last tick at or before ``instant``, in UTC. Ticks fall on whole seconds, and a
    reverse CronSim answers ticks strictly before its start: start one second on."""
    start = instant.astimezone(tz).replace(microsecond=0) + timedelta(seconds=1)
    return next(CronSim(cron, start, reverse=True)).astimezone(timezone.utc)


# -- defining (Client, App, CLI, HTTP API) ----------------------------------------------------
def define(db, name: str, cron: str, kind: str, payload: Any = None, *,
           timezone_name: str = "UTC", missed: str = "once",
           enabled: bool | None = None) -> dict:
    """``jobs.schedule``: create or replace; the stored row plus ``created``. ``enabled``
    None keeps what is stored (an operator's disable survives an app's redefinition)."""
    cron = check(cron, timezone_name, missed)
    return db._one(sql.SCHEDULE, {
        "name": name, "cron": cron, "kind": kind, "payload": Jsonb({} if payload is None else payload),
        "timezone": timezone_name, "missed": missed, "enabled": enabled})


def remove(db, name: str) -> bool:
    return bool(db._one(sql.UNSCHEDULE, {"name": name})["removed"])


def listing(db) -> list[dict]:
    return db._all(sql.SCHEDULES)


# -- ticking (the reaper) ---------------------------------------------------------------------
class Ticker:
    """Enqueue the due ticks of every enabled schedule, once per reaper tick."""

    def __init__(self, db, interval: float):
        self.db = db
        self.late_after = timedelta(seconds=max(LATE_AFTER_MIN, 3 * interval))
        # One line per schedule and problem until the problem changes, not one per tick.
        self._reported: dict[str, str] = {}

    def tick(self, push: Callable[[list[Signal]], list[Signal]]) -> int:
        """Returns how many jobs this call enqueued. ``push`` pushes signals and answers
        those it could not; they are parked as enqueue_failed for the reaper's recovery."""
        try:
            due = self.db._all(sql.DUE_SCHEDULES)
        except psycopg.errors.UndefinedFunction as exc:
            self._report("", "schema", "schedules_unavailable",
                         "the schema has no jobs.schedules (deploy it with `jobfence db "
                         "deploy`, or run the reaper with --no-schedules)", error=str(exc))
            return 0
        created: list[int] = []
        for row in due:
            try:
                job_id = self._tick_one(row)
            except (ScheduleError, JobfenceError) as exc:
                # One schedule's problem (a cron text no parser reads, a payload its kind
                # refuses since) must not stop the others, nor the reaper's repairs.
                self._report(row["name"], str(exc), "schedule_failed",
                             "schedule not ticked", error=str(exc),
                             sqlstate=getattr(exc, "sqlstate", None))
                continue
            self._reported.pop(row["name"], None)
            if job_id is not None:
                created.append(job_id)
        if created:
            unsent = push(self.db.signals(created))
            if unsent:
                self.db.mark_enqueue_failed([s.job_id for s in unsent])
        return len(created)

    def _tick_one(self, row: dict) -> int | None:
        """The id of the job this call created for the schedule, if any."""
        name, cron, now = row["name"], row["cron"], row["database_now"]
        tz = zone(row["timezone"])
        try:
            latest = latest_at_or_before(cron, tz, now)
            upcoming = next_after(cron, tz, now)
        except CronSimError as exc:
            raise ScheduleError(f"cron {cron!r}: {exc}") from None
        if latest > row["ticked_through"]:
            if row["missed"] == "skip" and now - latest > self.late_after:
                self._skip(name, latest, upcoming)
                jlog.event(logger, logging.INFO, "schedule_skipped",
                           "ticks missed while no reaper ran are skipped (missed = skip)",
                           schedule=name, through=latest.isoformat(),
                           next_tick=upcoming.isoformat())
                return None
            found = self.db._one(sql.ENQUEUE_TICK, {"name": name, "tick": latest,
                                                    "next_tick": upcoming})
            if found is None or not found["signal"]:
                return None   # unscheduled meanwhile, or another reaper enqueued it first
            jlog.event(logger, logging.DEBUG, "schedule_ticked", "tick enqueued",
                       schedule=name, tick=latest.isoformat(), job_id=found["job_id"])
            return found["job_id"]
        if row["next_tick"] != upcoming:
            # Nothing is due up to now: only the next tick is news (a new or changed schedule).
            self._skip(name, now, upcoming)
        return None

    def _skip(self, name: str, through: datetime, upcoming: datetime) -> None:
        self.db._all(sql.SKIP_TICKS, {"name": name, "through": through, "next_tick": upcoming})

    def _report(self, name: str, problem: str, event: str, msg: str, **fields) -> None:
        if self._reported.get(name) == problem:
            return
        self._reported[name] = problem
        jlog.event(logger, logging.WARNING, event, msg, schedule=name or None, **fields)
