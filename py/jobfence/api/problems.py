"""Errors as ``application/problem+json`` (RFC 9457).

Every error answer has ``type``, ``title``, ``status``, ``detail``, ``name`` and ``sqlstate``
(null when PostgreSQL did not raise it). The SQLSTATE registry of docs/errors.md decides the
status of everything the SQL refuses, so the API never second-guesses the state machine.
"""

from __future__ import annotations

import json
import logging
from http import HTTPStatus
from typing import Any

import psycopg
from fastapi import Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response

from .. import log as jlog
from ..errors import (IdempotencyKeyReused, IllegalTransition, InvalidParameter, JobfenceError,
                      JobNotFound, LeaseLost, PayloadTooLarge, UnknownKind, first_line)

logger = logging.getLogger("jobfence.api")

MEDIA_TYPE = "application/problem+json"
TYPE_PREFIX = "urn:jobfence:problem:"

# SQLSTATE registry class -> HTTP status (docs/http.md, "Errors").
STATUS_OF = {
    UnknownKind: 422,
    IdempotencyKeyReused: 422,
    PayloadTooLarge: 413,
    JobNotFound: 404,
    IllegalTransition: 409,
    LeaseLost: 409,
    InvalidParameter: 400,
}
PAYLOAD_ADVICE = ("Pass a reference to the data instead (an id, an object-storage key) and "
                  "load it when the job runs.")


class ApiProblem(Exception):
    """Raised by routes and dependencies for an answer that is not the SQL's to give."""

    def __init__(self, status: int, name: str, detail: str, *, headers: dict | None = None,
                 **extra: Any):
        super().__init__(detail)
        self.status, self.name, self.detail = status, name, detail
        self.headers, self.extra = headers, extra


def problem_body(status: int, name: str, detail: str, *, sqlstate: str | None = None,
                 **extra: Any) -> bytes:
    body = {"type": TYPE_PREFIX + name, "title": HTTPStatus(status).phrase, "status": status,
            "detail": detail, "name": name, "sqlstate": sqlstate}
    body.update(extra)
    return json.dumps(body, default=str).encode()


def problem(status: int, name: str, detail: str, *, sqlstate: str | None = None,
            headers: dict | None = None, **extra: Any) -> Response:
    return Response(problem_body(status, name, detail, sqlstate=sqlstate, **extra),
                    status_code=status, media_type=MEDIA_TYPE, headers=headers)


def loggable_path(scope) -> str:
    """The request target as the client sent it, percent-encoded, with anything else
    unprintable escaped: the decoded path would let ``%0a`` start a forged log line and
    ``%00`` write a NUL into the log."""
    raw = scope.get("raw_path")
    if not isinstance(raw, (bytes, bytearray)):
        raw = str(scope.get("path", "")).encode("utf-8", "surrogateescape")
    text = bytes(raw[:2000]).decode("ascii", "backslashreplace")
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii")
                   for c in text)


def _leaf_routes(routes):
    # An included router (mounted without a prefix here) holds the API's own routes.
    for route in routes:
        inner = getattr(route, "original_router", None)
        if inner is not None:
            yield from _leaf_routes(inner.routes)
        else:
            yield route


def allowed_methods(request: Request) -> list[str]:
    """Every method some route serves at this path (Starlette names only the first route
    whose path matched, so a 405 for ``/jobs`` would say ``POST`` though GET is served)."""
    path = request.scope.get("path", "")
    methods: set[str] = set()
    for route in _leaf_routes(request.app.router.routes):
        regex = getattr(route, "path_regex", None)
        if regex is not None and regex.match(path) and getattr(route, "methods", None):
            methods |= set(route.methods)
    if "GET" in methods:
        methods.add("HEAD")
    return sorted(methods)


def from_jobfence(exc: JobfenceError) -> Response:
    status = next((code for cls, code in STATUS_OF.items() if isinstance(exc, cls)), 500)
    detail = exc.message
    if isinstance(exc, PayloadTooLarge):
        detail = f"{detail}. {PAYLOAD_ADVICE}"
    if isinstance(exc, IdempotencyKeyReused):
        return problem(status, exc.name, detail, hint=exc.hint, differences=[
            {"index": d["pos"], "idempotency_key": d["idempotency_key"], "job_id": d["job_id"],
             "differs": list(d["differs"])} for d in exc.differences])
    return problem(status, exc.name, detail, sqlstate=exc.sqlstate, hint=exc.hint)


def _validation_detail(errors: list[dict]) -> tuple[str, list[dict]]:
    listed = []
    for err in errors[:20]:
        where = ".".join(str(part) for part in err.get("loc", ()))
        listed.append({"location": where, "message": str(err.get("msg", ""))[:300]})
    first = listed[0] if listed else {"location": "", "message": "invalid request"}
    return f"{first['location']}: {first['message']}".strip(": "), listed


def install(app) -> None:
    """Register the handlers that turn every failure into a problem document."""

    @app.exception_handler(ApiProblem)
    async def _api_problem(_request: Request, exc: ApiProblem):
        return problem(exc.status, exc.name, exc.detail, headers=exc.headers, **exc.extra)

    @app.exception_handler(JobfenceError)
    async def _jobfence(_request: Request, exc: JobfenceError):
        return from_jobfence(exc)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_request: Request, exc: RequestValidationError):
        # 400, not FastAPI's 422: 422 is kept for what PostgreSQL refuses (an unknown kind).
        detail, errors = _validation_detail(list(exc.errors()))
        return problem(400, "bad_request", detail, errors=errors)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException):
        names = {400: "bad_request", 404: "not_found", 405: "method_not_allowed"}
        headers = dict(getattr(exc, "headers", None) or {})
        detail = str(exc.detail)
        if exc.status_code == 405:
            allowed = allowed_methods(request)
            headers["Allow"] = ", ".join(allowed)
            method = request.scope.get("jobfence.method", request.method)
            detail = f"{method} is not served here; allowed: {', '.join(allowed)}"
        return problem(exc.status_code, names.get(exc.status_code, "http_error"), detail,
                       headers=headers or None)

    @app.exception_handler(psycopg.OperationalError)
    async def _db_down(request: Request, exc: psycopg.OperationalError):
        jlog.event(logger, logging.WARNING, "db_unavailable", "PostgreSQL unavailable",
                   path=loggable_path(request.scope), error=first_line(exc))
        return problem(503, "postgresql_unavailable", "PostgreSQL does not answer; retry later",
                       headers={"Retry-After": "1"})

    @app.exception_handler(psycopg.DataError)
    async def _data(_request: Request, exc: psycopg.DataError):
        # SQLSTATE class 22: the input cannot be stored, e.g. a \u0000 in a payload string,
        # a date out of range.
        sqlstate, detail = exc.sqlstate, first_line(exc)
        if sqlstate is None and "NUL" in detail:
            # psycopg refuses a NUL in a text parameter (kind, a key, a reason) before
            # PostgreSQL sees it; PostgreSQL answers the same input in jsonb with 22P05.
            sqlstate = "22P05"
            detail = ("a string holds a NUL character (\\u0000), which PostgreSQL text "
                      "cannot store")
        return problem(400, "invalid_input", detail, sqlstate=sqlstate)

    @app.exception_handler(psycopg.errors.ProgramLimitExceeded)
    async def _limit(_request: Request, exc: psycopg.Error):
        return problem(400, "invalid_input", first_line(exc), sqlstate=exc.sqlstate)

    @app.exception_handler(psycopg.errors.InsufficientPrivilege)
    async def _no_grant(request: Request, exc: psycopg.Error):
        # The deployment's fault, not the caller's: a 500, but one that says what to grant.
        detail, hint = missing_grant(exc)
        jlog.event(logger, logging.ERROR, "missing_grant", detail,
                   path=loggable_path(request.scope), sqlstate=exc.sqlstate)
        return problem(500, "missing_grant", detail, sqlstate=exc.sqlstate, hint=hint)

    @app.exception_handler(psycopg.Error)
    async def _db_error(request: Request, exc: psycopg.Error):
        jlog.event(logger, logging.ERROR, "database_error", first_line(exc),
                   path=loggable_path(request.scope), sqlstate=exc.sqlstate)
        return problem(500, "database_error", first_line(exc), sqlstate=exc.sqlstate)


def missing_grant(exc: psycopg.Error) -> tuple[str, str]:
    """A 42501 as (detail, hint): which object the API's database login may not use, and how
    a deployment gives it the grant."""
    return (f"the API's database login lacks a grant: {first_line(exc)}",
            "Queue depth, metrics, schedules, replay and pause need a login in jobs_admin: set "
            "JOBFENCE_API_ADMIN_DATABASE_URL (scripts/roles.sql creates jobfence_api_admin) or "
            "GRANT jobs_admin to the API's login (docs/http.md, \"Database logins\").")
