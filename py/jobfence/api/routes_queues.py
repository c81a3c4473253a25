"""Pausing and resuming a queue over HTTP (docs/http.md, "Queues"): admin only. Each route is
one call of the AsyncClient; a resume also signals the queue's waiting jobs at once."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Path, Request
from pydantic import Field

from ..names import NAME, name_hint
from .auth import ADMIN, require
from .guard import GuardedRoute
from .problems import ApiProblem
from .render import Json
from .routes import _client, _problems
from .schemas import Answer

router = APIRouter(route_class=GuardedRoute)
admin = Depends(require(ADMIN))

QUEUE_HINT = name_hint("Queue")
QueueName = Path(description="The queue's name: 1-128 of A-Z a-z 0-9 _ . : / - starting with a "
                             "letter or digit.")


class PauseAnswer(Answer):
    queue: str
    paused: bool = Field(description="The queue's state now.")
    changed: bool = Field(description="False when it already was in that state.")


class ResumeAnswer(PauseAnswer):
    signalled: int = Field(description="Waiting jobs whose ids were pushed again.")
    enqueued: bool = Field(description="False when that push failed: the jobs are "
                           "enqueue_failed and the reaper signals them.")


def _checked(queue: str) -> str:
    if not NAME.fullmatch(queue):
        raise ApiProblem(400, "invalid_parameter_value", f"queue {queue[:200]!r} is malformed",
                         sqlstate="22023", hint=QUEUE_HINT,
                         errors=[{"location": "path.queue", "message": "malformed queue"}])
    return queue


@router.post("/queues/{queue}/pause", response_model=None, tags=["operations"],
             summary="Stop claims of a queue's jobs (admin)",
             responses={200: {"model": PauseAnswer, "description": "Paused (jobs already "
                              "running go on)."}, **_problems(400, 401, 403, 415, 503)})
async def pause(request: Request, queue: str = QueueName, _scope=admin):
    changed = await _client(request).pause(_checked(queue))
    return Json({"queue": queue, "paused": True, "changed": changed})


@router.post("/queues/{queue}/resume", response_model=None, tags=["operations"],
             summary="Let a paused queue's jobs be claimed again, and signal them (admin)",
             responses={200: {"model": ResumeAnswer, "description": "Resumed."},
                        **_problems(400, 401, 403, 415, 503)})
async def resume(request: Request, queue: str = QueueName, _scope=admin):
    changed, signalled, pushed = await _client(request).resume(_checked(queue))
    if not pushed:
        request.app.state.metrics.not_enqueued.inc(signalled)
    return Json({"queue": queue, "paused": False, "changed": changed, "signalled": signalled,
                 "enqueued": pushed})
