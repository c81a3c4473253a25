"""The routes (docs/http.md). Each one is a call of the AsyncClient, which runs named
statements of ``jobfence.sql``: nothing here decides a job's state."""

from __future__ import annotations

import asyncio
from typing import Optional
from urllib.parse import urlencode

from fastapi import APIRouter, Body, Depends, Header, Path, Query, Request
from starlette.responses import Response

from .. import redact
from ..aio import AsyncClient
from ..db import replay_filter_problem
from ..names import NAME, name_hint
from ..tracing import current_traceparent, valid_traceparent
from ..transport import MAX_JOB_ID
from . import schemas as s
from .auth import ADMIN, PRODUCER, require
from .guard import GuardedRoute, header_text
from .problems import ApiProblem, problem
from .render import Json, brief, event_view, job_view, links, plain

TERMINAL = ("done", "failed")
MAX_WAIT = 60.0
NOT_ENQUEUED = ("the job is committed but its signal could not be pushed to Redis: it is "
                "enqueue_failed, and the reaper will signal it once Redis answers")
KIND_HINT = name_hint("Kind")

router = APIRouter(route_class=GuardedRoute)
producer = Depends(require(PRODUCER))
admin = Depends(require(ADMIN))

JobId = Path(ge=1, le=MAX_JOB_ID, description="A job id (positive 64-bit integer).")


def _problems(*codes: int) -> dict:
    described = {400: "malformed JSON, a schema violation or a value the SQL refuses (22023)",
                 401: "no valid bearer token",
                 403: "the token's scope does not allow this, or (POST, PUT, DELETE) an "
                      "Origin that is not this server's",
                 404: "no such job (JB002)", 409: "refused by the state machine",
                 413: "body over the cap, or payload over the kind's limit (JB004)",
                 415: "Content-Type missing or not application/json (UTF-8): required on "
                      "every POST, PUT and DELETE, even without a body",
                 422: "unknown kind (JB005), or an idempotency key repeated with a different request", 503: "PostgreSQL does not answer"}
    return {code: {"model": s.Problem, "description": described[code]} for code in codes}


def _client(request: Request) -> AsyncClient:
    """The pool of the login that serves the scope this request holds (api/logins.py): an
    admin-scoped request runs as the admin login, a producer-scoped one as the API's."""
    admin = getattr(request.app.state, "admin_client", None)
    if admin is not None and getattr(request.state, "scope", None) == ADMIN:
        return admin
    return request.app.state.client


def _reader(request: Request) -> AsyncClient:
    """The read-only views anyone signed in may see (queue depth, schedules) read as the
    admin login when there is one: jobs_producer holds no grant on them."""
    return getattr(request.app.state, "admin_client", None) or request.app.state.client


def _parked_ids(jobs) -> list[int]:
    # Whether a job's signal is in Redis is its status, not whether this request pushed:
    # a repeat of an enqueue_failed job pushes nothing and is still waiting for the reaper.
    return [job.id for job in jobs if job.status == "enqueue_failed"]


def _parked_detail(ids: list[int]) -> str:
    shown = ", ".join(str(i) for i in ids[:20]) + (", ..." if len(ids) > 20 else "")
    which = f"job {shown} is" if len(ids) == 1 else f"jobs {shown} ({len(ids)}) are"
    return (f"committed, but the signal could not be pushed to Redis: {which} "
            "enqueue_failed, and the reaper will signal them once Redis answers")


def _accepted(job, created: bool) -> dict:
    body = brief(job, created)
    body["enqueued"] = job.status != "enqueue_failed"
    body["run_after"] = job.run_after
    if not body["enqueued"]:
        body["detail"] = NOT_ENQUEUED
    return body


def _traceparent(request: Request) -> str | None:
    """The caller's W3C trace context (the ``traceparent`` header), else the current span's
    (an instrumented API), stored with the jobs it submits. A malformed header is ignored,
    as W3C Trace Context asks of a receiver: the jobs are submitted without it."""
    return valid_traceparent(request.headers.get("traceparent")) or current_traceparent()


def _noted(request: Request, jobs) -> None:
    """Count the jobs this request parked; pass only those it created (a repeat of a parked
    job was counted when it was parked)."""
    parked = sum(1 for job in jobs if job.status == "enqueue_failed")
    if parked:
        request.app.state.metrics.not_enqueued.inc(parked)


SUBMIT_ERRORS = _problems(400, 401, 403, 413, 415, 422, 503)


@router.post("/jobs", status_code=202, response_model=None, tags=["jobs"],
             summary="Submit a job (commit, then push)",
             responses={202: {"model": s.Accepted, "description": "Committed; `enqueued` says "
                              "whether the signal reached Redis."},
                        200: {"model": s.Accepted, "description": "An idempotent repeat: the "
                              "existing job (`created: false`)."}, **SUBMIT_ERRORS})
async def submit_job(request: Request, spec: s.JobSpec,
                     _idempotency_key: Optional[str] = Header(
                         None, alias="Idempotency-Key",
                         description="Unique per kind (scoped by unique_while and unique_for); "
                                     "an identical repeat returns the existing job (200), one "
                                     "whose payload, run_after, ordering_key or priority differ "
                                     "is a 422 unless it asks for a debounce. UTF-8."),
                     _scope=producer):
    key = header_text(request, "Idempotency-Key")
    submitted, _pushed = await _client(request).submit_job(
        spec.kind, spec.payload, idempotency_key=key,
        run_after=spec.run_after, ordering_key=spec.ordering_key, priority=spec.priority,
        compare=spec.compared(key), unique_while=spec.unique_while, unique_for=spec.unique_for,
        debounce=spec.debounce, traceparent=_traceparent(request),
        depends_on=spec.dependencies(), on_dependency_failure=spec.on_dependency_failure,
        concurrency_key=spec.concurrency_key)
    job = submitted.job
    _noted(request, [job] if submitted.created else [])
    return Json(_accepted(job, submitted.created),
                status_code=202 if submitted.created else 200,
                headers={"Location": f"/jobs/{job.id}"})


@router.post("/jobs/batch", status_code=202, response_model=None, tags=["jobs"],
             summary="Submit up to 1000 jobs, all or nothing",
             responses={202: {"model": s.BatchAccepted, "description": "Committed, in input "
                              "order."}, **SUBMIT_ERRORS})
async def submit_batch(request: Request, batch: s.BatchRequest, _scope=producer):
    traced = _traceparent(request)
    specs = [j.spec() for j in batch.jobs]
    if traced:
        specs = [dict(spec, traceparent=spec.get("traceparent") or traced) for spec in specs]
    submitted, _pushed = await _client(request).submit_jobs(
        specs, compare=[j.compared() for j in batch.jobs])
    _noted(request, [x.job for x in submitted if x.created])
    parked = _parked_ids(x.job for x in submitted)
    body = {"jobs": [brief(x.job, x.created) for x in submitted], "enqueued": not parked}
    if parked:
        body["detail"] = _parked_detail(parked)
    return Json(body, status_code=202)


@router.post("/jobs/fan-out", status_code=202, response_model=None, tags=["jobs"],
             summary="Children and a coordinator that runs once they all ended",
             responses={202: {"model": s.FanOutAccepted, "description": "Committed."},
                        200: {"model": s.FanOutAccepted, "description": "An idempotent repeat "
                              "(the coordinator's key exists)."}, **SUBMIT_ERRORS})
async def fan_out(request: Request, family: s.FanOutRequest, _scope=producer):
    coordinator, children, _pushed = await _client(request).fan_out_jobs(
        [c.spec() for c in family.children], family.then.spec(), compare=family.then.compared())
    _noted(request, [coordinator.job] + children if coordinator.created else [])
    body = _accepted(coordinator.job, coordinator.created)
    # The coordinator of a family is queued, waiting for its children, and needs no signal
    # before they ended: what was parked, if anything, is children.
    parked = _parked_ids([coordinator.job] + children)
    body["enqueued"] = not parked
    body.pop("detail", None)
    if parked:
        body["detail"] = _parked_detail(parked)
    body["children"] = [brief(c, coordinator.created) for c in children]
    return Json(body, status_code=202 if coordinator.created else 200,
                headers={"Location": f"/jobs/{coordinator.job.id}"})


@router.get("/jobs/{job_id}", response_model=None, tags=["jobs"], summary="One job",
            responses={200: {"model": s.JobView, "description": "The job; with `wait`, once "
                             "it is terminal or the wait ended (the status tells)."},
                       **_problems(400, 401, 403, 404, 503)})
async def get_job(request: Request, job_id: int = JobId,
                  wait: float = Query(0, ge=0, le=MAX_WAIT, allow_inf_nan=False,
                                      description="Seconds (0-60, a finite number) to wait "
                                      "for the job to be done or failed (long poll)."),
                  _scope=producer):
    client = _client(request)
    job = await client.get(job_id)
    if wait and job.status not in TERMINAL:
        ended = await request.app.state.waiters.wait(job_id, wait)
        job = ended if ended is not None else await client.get(job_id)
    return Json(job_view(job))


@router.get("/jobs/{job_id}/events", response_model=None, tags=["jobs"],
            summary="The job's transitions, oldest first",
            responses={200: {"model": s.Events, "description": "The audit trail."},
                       **_problems(400, 401, 403, 404, 503)})
async def get_events(request: Request, job_id: int = JobId, _scope=producer):
    client = _client(request)
    events = await client.events(job_id)
    if not events:
        # Every job has its `submitted` event: none means no such job (JB002 from jobs.get).
        await client.get(job_id)
    return Json({"events": [event_view(e) for e in events]})


@router.get("/jobs/{job_id}/children", response_model=None, tags=["jobs"],
            summary="A coordinator's children",
            responses={200: {"model": s.Children, "description": "By id; empty for a job "
                             "without children."}, **_problems(400, 401, 403, 404, 503)})
async def get_children(request: Request, job_id: int = JobId, _scope=producer):
    client = _client(request)
    children = await client.children(job_id)
    if not children:
        await client.get(job_id)
    return Json({"children": [job_view(c) for c in children]})


@router.post("/jobs/{job_id}/cancel", response_model=None, tags=["jobs"],
             summary="Cancel: a waiting job fails now, a running one is asked to stop",
             responses={200: {"model": s.CancelAnswer, "description": "The job was waiting: "
                              "it is failed now."},
                        202: {"model": s.CancelAnswer, "description": "The job is running: its "
                              "worker is told at its next heartbeat."},
                        **_problems(400, 401, 403, 404, 409, 413, 415, 503)})
async def cancel(request: Request, job_id: int = JobId,
                 body: Optional[s.CancelRequest] = Body(None), _scope=producer):
    reason = body.reason if body is not None and body.reason is not None else "cancelled"
    outcome, enqueued = await _client(request).cancel(job_id, reason)
    if not outcome.accepted:
        raise ApiProblem(409, "already_finished", f"job {job_id} already ended "
                         f"({outcome.status}); nothing to cancel", job_status=outcome.status)
    return Json({"id": job_id, "accepted": True, "status": outcome.status,
                 "enqueued": enqueued, "links": links(job_id)},
                status_code=202 if outcome.status == "processing" else 200)


@router.post("/jobs/{job_id}/replay", status_code=202, response_model=None, tags=["jobs"],
             summary="Re-drive a failed job (admin)",
             responses={202: {"model": s.ReplayAnswer, "description": "Queued again, retry "
                              "budget reset."}, **_problems(400, 401, 403, 404, 409, 415, 503)})
async def replay(request: Request, job_id: int = JobId, _scope=admin):
    replayed, enqueued = await _client(request).replay(job_id)
    if not replayed:
        raise ApiProblem(409, "already_done", f"job {job_id} is done: replay re-drives "
                         "failed jobs only (nothing was changed)", job_status="done")
    if not enqueued:
        request.app.state.metrics.not_enqueued.inc()
    return Json({"id": job_id, "replayed": True,
                 "status": "queued" if enqueued else "enqueue_failed", "enqueued": enqueued,
                 "links": links(job_id)}, status_code=202)


@router.post("/dead-letters/replay", response_model=None, tags=["jobs"],
             summary="Re-drive failed jobs in bulk, in one transaction (admin)",
             responses={200: {"model": s.ReplayManyAnswer, "description": "What was queued "
                              "again (possibly nothing)."},
                        **_problems(400, 401, 403, 413, 415, 503)})
async def replay_many(request: Request, body: Optional[s.ReplayManyRequest] = Body(None),
                      _scope=admin):
    # Every field is optional, so the body is too: none means {}, as a cancel without one.
    body = body or s.ReplayManyRequest()
    refused = replay_filter_problem(body.kind, body.error_like)
    if refused:
        field, message, hint = refused
        raise ApiProblem(400, "invalid_parameter_value", f"jobs.replay_many: {message}",
                         sqlstate="22023", hint=hint,
                         errors=[{"location": f"body.{field}", "message": message}])
    ids, enqueued = await _client(request).replay_many(
        body.kind, error_like=body.error_like, failed_since=body.failed_since,
        max_jobs=body.max_jobs)
    if not enqueued:
        request.app.state.metrics.not_enqueued.inc()
    return Json({"replayed": len(ids), "ids": ids, "enqueued": enqueued})


@router.get("/jobs", response_model=None, tags=["jobs"], summary="Jobs, newest first",
            responses={200: {"model": s.JobPage, "description": "One page."},
                       **_problems(400, 401, 403, 503)})
async def list_jobs(request: Request,
                    kind: Optional[str] = Query(None, description="Only this kind."),
                    status: Optional[s.Status] = Query(None, description="Only this status."),
                    limit: int = Query(100, ge=1, le=1000),
                    after: Optional[int] = Query(None, ge=1, le=MAX_JOB_ID, description="The "
                                                 "last id of the previous page."),
                    ordering_key: Optional[str] = Query(None, min_length=1, max_length=200,
                                                        description="Only jobs of this "
                                                        "ordering key, every status."),
                    _scope=producer):
    if kind is not None and not NAME.fullmatch(kind):
        raise ApiProblem(400, "invalid_parameter_value",
                         f"jobs.list_jobs: kind {kind[:200]!r} is malformed",
                         sqlstate="22023", hint=KIND_HINT,
                         errors=[{"location": "query.kind", "message": "malformed kind"}])
    found = await _client(request).list_jobs(kind=kind, status=status, before_id=after,
                                             max_jobs=limit, ordering_key=ordering_key)
    following = None
    if len(found) == limit:
        query = {k: v for k, v in (("kind", kind), ("status", status), ("limit", limit),
                                   ("ordering_key", ordering_key)) if v is not None}
        query["after"] = found[-1].id
        following = f"/jobs?{urlencode(query)}"
    return Json({"jobs": [job_view(j) for j in found], "next": following})


@router.get("/queues", response_model=None, tags=["operations"],
            summary="Backlog per queue and kind (jobs.queue_depth)",
            responses={200: {"model": s.Queues, "description": "One row per queue and kind."},
                       **_problems(400, 401, 403, 503)})
async def queues(request: Request, _scope=producer):
    return Json({"queues": [plain(r) for r in await _reader(request).queue_depth()]})


@router.get("/healthz", response_model=None, tags=["operations"],
            summary="200 while jobs can be accepted (no token needed; HEAD too)",
            responses={200: {"model": s.Health, "description": "PostgreSQL answers. "
                             "`degraded: true` when Redis does not: submits still answer 202 "
                             "(`enqueued: false`) and the reaper signals the jobs later."},
                       503: {"model": s.Problem, "description": "PostgreSQL does not answer "
                             "(the problem's `checks` say why)."}})
async def healthz(request: Request):
    client = _client(request)
    checks = {}

    for name, probe in (("postgresql", client.queues), ("redis", client.redis.ping)):
        try:
            await asyncio.wait_for(probe(), 2.0)
            checks[name] = "ok"
        except asyncio.TimeoutError:
            checks[name] = "TimeoutError: no answer within 2 s"
        except Exception as exc:  # noqa: BLE001 - any failure is the answer itself
            checks[name] = redact.text(f"{type(exc).__name__}: {str(exc).strip()[:200]}").rstrip(": ")
    if checks["postgresql"] != "ok":
        # Without PostgreSQL nothing can be accepted or read: take this instance out.
        detail = ("PostgreSQL does not answer" if checks["redis"] == "ok"
                  else "PostgreSQL and Redis do not answer")
        return problem(503, "unavailable", detail, checks=checks, headers={"Retry-After": "1"})
    degraded = checks["redis"] != "ok"
    return Json({"status": "degraded" if degraded else "ok", "degraded": degraded, **checks})


@router.get("/metrics", response_model=None, tags=["operations"],
            summary="Prometheus text: the API's requests and the SQL metrics (admin)",
            responses={200: {"content": {"text/plain": {}}, "description": "Exposition "
                             "format 0.0.4."}, **_problems(400, 401, 403)})
async def metrics(request: Request, _scope=admin):
    state = request.app.state
    text = await asyncio.to_thread(state.metrics.text, state.sql_registry)
    return Response(text, media_type="text/plain; version=0.0.4; charset=utf-8")
