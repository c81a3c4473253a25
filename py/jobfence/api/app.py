"""The application factory: ``create_app(Settings(...))``.

One process holds one ``AsyncClient`` (a psycopg ``AsyncConnectionPool`` and a
``redis.asyncio`` client), one long-poll hub and, for ``GET /metrics``, a small synchronous
pool the SQL collector scrapes through.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass, field
from typing import Callable, Sequence

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from .. import __version__
from . import problems, routes, routes_queues, routes_schedules
from .auth import Authenticator, Token
from .client import ApiClient
from .hosts import HostGuard, HostPolicy
from .metrics import ApiMetrics
from .middleware import BodyLimit, HeadAsGet, Observe
from .waiters import Waiters

# Bodies over this are refused unread: 1000 specs of identifiers fit many times over; data
# belongs in storage, referenced from the payload.
DEFAULT_MAX_BODY_BYTES = 1536 * 1024
# A 1.5 MiB body at 100 kB/s still arrives; a body trickled in to hold a connection does not.
DEFAULT_BODY_TIMEOUT = 30.0

DESCRIPTION = """Submit jobs and follow them over HTTP. PostgreSQL is the system of record:
a submit answers **202 Accepted** once the job is committed, then its id is pushed to Redis
(`enqueued: false` when that push failed: the job is `enqueue_failed` and the reaper signals
it). Errors are `application/problem+json` (RFC 9457) with the SQLSTATE of docs/errors.md.
Every route but `/healthz` needs `Authorization: Bearer TOKEN` (see docs/http.md)."""


@dataclass
class Settings:
    database_url: str = "postgresql://127.0.0.1:5432/jobfence"
    redis_url: str = "redis://127.0.0.1:6379/0"
    # Where GET /metrics and the dashboard's overview read (e.g. a hot standby); None:
    # the admin login's database (api/logins.py).
    read_database_url: str | None = None
    # The login admin-scoped requests and the read-only views run as (a jobs_admin member);
    # None: database_url's login, if it is in jobs_admin (api/logins.py).
    admin_database_url: str | None = None
    # None: --no-auth (every request holds the admin scope).
    tokens: list[Token] | None = None
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    body_timeout: float = DEFAULT_BODY_TIMEOUT
    # The Host names answered (loopback only by default) and the origins besides a
    # request's own that may change state (hosts.py).
    host_policy: HostPolicy = field(default_factory=HostPolicy)
    pool_size: int = 10
    wait_interval: float = 0.075
    # Called once the pools are open and the long-poll hub runs (the CLI logs api_listening).
    on_ready: Callable[[], None] | None = None


def create_app(settings: Settings | None = None,
               mounts: Sequence[Callable[[FastAPI], None]] = ()) -> FastAPI:
    """The HTTP API. ``mounts`` add routes beside it (the dashboard: jobfence.web composes
    the two), before the middleware, so the host check and the body cap cover them too."""
    settings = settings or Settings()
    api_metrics = ApiMetrics()

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI):
        from ..db import Database
        from ..observe.exporter import registry_for

        client = ApiClient(settings.database_url, settings.redis_url,
                             pool_size=settings.pool_size, timeout=5.0, name="jobfence-api")
        await client.pool.open()
        admin = None
        if settings.admin_database_url:
            admin = ApiClient(settings.admin_database_url, settings.redis_url,
                              pool_size=max(2, settings.pool_size // 2), timeout=5.0,
                              name="jobfence-api-admin")
            await admin.pool.open()
        elif await _is_admin(client):
            # Also when PostgreSQL is away at start (jobfence api checked the logins before,
            # when it could): a missing grant is then a missing_grant answer, not a 500.
            admin = client
        waiters = Waiters(client, settings.wait_interval)
        waiters.start()
        api_metrics.waiting.set_function(waiters.count)
        # As `jobfence metrics`: a scrape waits briefly for a connection and bounds each
        # statement, so Prometheus gets an answer (jobfence_up 0) within its timeout.
        scrape_db = Database(settings.read_database_url or settings.admin_database_url
                             or settings.database_url, max_size=1,
                             name="jobfence-api-metrics",
                             timeout=3.0, statement_timeout=5.0)
        # The dashboard's overview reads a hot standby when one is named, like the scrape.
        reader = admin or client
        if settings.read_database_url:
            from ..aio import AsyncClient

            reader = AsyncClient(settings.read_database_url, settings.redis_url, pool_size=2,
                                 timeout=5.0, name="jobfence-api-reads")
            await reader.pool.open()
        app.state.client, app.state.read_client, app.state.waiters = client, reader, waiters
        app.state.admin_client = admin
        app.state.sql_registry, _collector = registry_for(scrape_db)
        if settings.on_ready is not None:
            settings.on_ready()
        try:
            yield
        finally:
            await waiters.stop()
            await client.close()
            if admin is not None and admin is not client:
                await admin.close()
            if reader is not client and reader is not admin:
                await reader.close()
            scrape_db.close()

    app = FastAPI(title="jobfence", version=__version__, description=DESCRIPTION,
                  lifespan=lifespan, docs_url=None, redoc_url=None,
                  # guard.py decides the media type (a state-changing request without
                  # Content-Type: application/json is a 415) before FastAPI looks.
                  strict_content_type=False,
                  # A redirect would name this process's own scheme and host, which behind
                  # a proxy are the wrong ones; /jobs/ is a 404 instead.
                  redirect_slashes=False)
    app.state.auth = Authenticator(settings.tokens)
    app.state.metrics = api_metrics
    app.state.host_policy = settings.host_policy
    problems.install(app)
    app.include_router(routes.router)
    app.include_router(routes_schedules.router)
    app.include_router(routes_queues.router)
    for mount in mounts:
        mount(app)
    app.add_middleware(HeadAsGet)
    app.add_middleware(BodyLimit, max_bytes=settings.max_body_bytes,
                       timeout=settings.body_timeout)
    # Outside the body cap: a request to a Host not allowed is refused unread.
    app.add_middleware(HostGuard, policy=settings.host_policy)
    # Added last, so outermost: it also counts what the host check and the body cap refused.
    app.add_middleware(Observe, metrics=api_metrics)
    app.openapi = lambda: openapi_document(app)
    return app


async def _is_admin(client) -> bool:
    import psycopg
    from psycopg_pool import PoolTimeout

    try:
        async with client.pool.connection() as conn:
            cur = await conn.execute("SELECT pg_has_role(session_user, 'jobs_admin', 'MEMBER')")
            return bool((await cur.fetchone())[0])
    except (psycopg.OperationalError, PoolTimeout):
        return True


def openapi_document(app: FastAPI) -> dict:
    """FastAPI's document, with its default 422 "validation error" answers removed (this
    API answers 400 for those, and 422 only for an unknown kind) and every error answer
    declared as application/problem+json."""
    if app.openapi_schema:
        return app.openapi_schema
    doc = get_openapi(title=app.title, version=app.version, description=app.description,
                      routes=app.routes, tags=[
                          {"name": "jobs", "description": "Submit and follow jobs."},
                          {"name": "operations", "description": "Queues, health, metrics."}])
    for path in doc.get("paths", {}).values():
        for operation in path.values():
            answers = operation.get("responses", {})
            default = answers.get("422", {})
            if "HTTPValidationError" in json.dumps(default):
                del answers["422"]
            for code, answer in answers.items():
                # Errors are problem documents: one media type, with the Problem schema.
                if int(code) >= 400 and "content" in answer:
                    answer["content"] = {problems.MEDIA_TYPE: {
                        "schema": {"$ref": "#/components/schemas/Problem"}}}
    schemas = doc.get("components", {}).get("schemas", {})
    for name in ("HTTPValidationError", "ValidationError"):
        schemas.pop(name, None)
    app.openapi_schema = doc
    return doc


def openapi_text() -> str:
    """The committed docs/openapi.json: ``jobfence api --print-openapi > docs/openapi.json``."""
    return json.dumps(openapi_document(create_app()), indent=2, sort_keys=True) + "\n"
