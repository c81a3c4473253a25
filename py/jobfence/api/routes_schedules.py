"""Periodic jobs over HTTP (docs/http.md, "Schedules"): list them (producer), create, replace
and delete them (admin). Each route is one statement of ``jobfence.sql``; the cron text is
parsed here first, as every driver does, so one no ticker can read is never stored."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal, Optional

from fastapi import APIRouter, Depends, Path, Request
from psycopg.types.json import Jsonb
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictStr
from starlette.responses import Response

from .. import sql
from ..schedules import ScheduleError, check, zone
from .auth import ADMIN, PRODUCER, require
from .guard import GuardedRoute
from .problems import ApiProblem
from .render import Json, plain
from .routes import _client, _problems, _reader
from .schemas import Answer, Problem

router = APIRouter(route_class=GuardedRoute)
producer = Depends(require(PRODUCER))
admin = Depends(require(ADMIN))

ScheduleName = Path(description="The schedule's name: 1-128 of A-Z a-z 0-9 _ . : / - "
                                "starting with a letter or digit.")
FIELDS = ("name", "cron", "kind", "payload", "timezone", "missed", "enabled", "ticked_through",
          "last_tick", "last_job_id", "next_tick", "created_at", "updated_at")


class ScheduleRequest(BaseModel):
    """What ``PUT /schedules/{name}`` takes: the whole definition."""

    model_config = ConfigDict(extra="forbid")

    cron: StrictStr = Field(description="5 fields (minute hour day-of-month month "
                            "day-of-week), or 6 with seconds first, e.g. `*/5 * * * *`.")
    kind: StrictStr = Field(description="A kind declared with jobs.define_type.")
    payload: dict[str, Any] = Field(default_factory=dict, description="The payload of every "
                                    "job it enqueues, at most the kind's max_payload_bytes.")
    timezone: StrictStr = Field("UTC", description="The time zone the cron text is read in, "
                                "e.g. `Europe/Paris`.")
    missed: Literal["once", "skip"] = Field("once", description="After downtime: enqueue the "
                                            "latest missed tick (`once`) or none (`skip`).")
    enabled: Optional[StrictBool] = Field(None, description="null or absent: keep the stored "
                                          "value (true for a new schedule).")


class ScheduleView(Answer):
    name: str
    cron: str
    kind: str
    payload: dict[str, Any]
    timezone: str
    missed: Literal["once", "skip"]
    enabled: bool
    ticked_through: datetime = Field(description="Every tick at or before it was enqueued "
                                     "or skipped.")
    last_tick: Optional[datetime] = Field(None, description="The last tick enqueued.")
    last_job_id: Optional[int] = Field(None, description="The job of last_tick.")
    next_tick: Optional[datetime] = Field(None, description="As the ticker (the reaper) "
                                          "computed it; null until it has looked.")
    created_at: datetime
    updated_at: datetime


class Schedules(Answer):
    schedules: list[ScheduleView]


def schedule_view(row: dict) -> dict:
    return plain({name: row[name] for name in FIELDS})


def _refused(location: str, exc: ScheduleError) -> ApiProblem:
    return ApiProblem(400, "invalid_parameter_value", f"jobs.schedule: {exc}",
                      errors=[{"location": location, "message": str(exc)}])


@router.get("/schedules", response_model=None, tags=["schedules"],
            summary="Periodic jobs, by name (jobs.schedules)",
            responses={200: {"model": Schedules, "description": "Every schedule, with its "
                             "last tick enqueued and next tick."},
                       **_problems(400, 401, 403, 503)})
async def list_schedules(request: Request, _scope=producer):
    found = await _reader(request)._all(sql.SCHEDULES, None)
    return Json({"schedules": [schedule_view(r) for r in found]})


@router.put("/schedules/{name}", response_model=None, tags=["schedules"],
            summary="Create or replace a periodic job (admin)",
            responses={201: {"model": ScheduleView, "description": "Created."},
                       200: {"model": ScheduleView, "description": "Replaced (or unchanged: "
                             "an unchanged definition keeps its position)."},
                       **_problems(400, 401, 403, 413, 415, 422, 503)})
async def put_schedule(request: Request, body: ScheduleRequest, name: str = ScheduleName,
                       _scope=admin):
    try:
        zone(body.timezone)
    except ScheduleError as exc:
        raise _refused("body.timezone", exc) from None
    try:
        cron = check(body.cron, body.timezone, body.missed)
    except ScheduleError as exc:
        raise _refused("body.cron", exc) from None
    (stored,) = await _client(request)._all(sql.SCHEDULE, {
        "name": name, "cron": cron, "kind": body.kind, "payload": Jsonb(body.payload),
        "timezone": body.timezone, "missed": body.missed, "enabled": body.enabled})
    return Json(schedule_view(stored), status_code=201 if stored["created"] else 200)


@router.delete("/schedules/{name}", status_code=204, response_model=None, tags=["schedules"],
               summary="Delete a periodic job; the jobs it enqueued stay (admin)",
               responses={204: {"description": "Deleted."},
                          404: {"model": Problem, "description": "no schedule has that name"},
                          **_problems(400, 401, 403, 415, 503)})
async def delete_schedule(request: Request, name: str = ScheduleName, _scope=admin):
    (found,) = await _client(request)._all(sql.UNSCHEDULE, {"name": name})
    if not found["removed"]:
        raise ApiProblem(404, "schedule_not_found", f"no schedule named {name[:200]!r}")
    return Response(status_code=204)
