"""ASGI middleware: HEAD as GET, the request body cap, and per-request metrics and log
lines."""

from __future__ import annotations

import asyncio
import logging
import time

from .. import log as jlog
from .metrics import ApiMetrics
from .problems import loggable_path, problem

logger = logging.getLogger("jobfence.api")


async def _send_problem(scope, receive, send, status: int, name: str, detail: str,
                        **extra) -> None:
    response = problem(status, name, detail, headers={"Connection": "close"}, **extra)
    await response(scope, receive, send)


class HeadAsGet:
    """Serve HEAD wherever GET is served, as HTTP requires (load balancers probe with HEAD):
    the GET route answers, and only its status and headers are sent."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["method"] != "HEAD":
            return await self.app(scope, receive, send)

        async def headers_only(message):
            if message["type"] == "http.response.body":
                message = {"type": "http.response.body", "body": b"",
                           "more_body": message.get("more_body", False)}
            await send(message)

        # A copy: the server reads scope["method"] to know the answer has no body.
        inner = dict(scope, method="GET", **{"jobfence.method": "HEAD"})
        try:
            await self.app(inner, receive, headers_only)
        finally:
            if "route" in inner:
                scope["route"] = inner["route"]


class BodyLimit:
    """Refuse a body over ``max_bytes`` before the application sees it: at once from its
    Content-Length (nothing is read), or as soon as a streamed (chunked) body passes the
    limit. A body under the limit is read whole here and handed on, so a route never parses
    a truncated document. A body not complete within ``timeout`` seconds of its headers is a
    408: uvicorn waits for a trickling body as long as the client keeps sending."""

    def __init__(self, app, max_bytes: int, timeout: float = 30.0):
        self.app = app
        self.max_bytes = max_bytes
        self.timeout = timeout

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        too_large = (f"the request body exceeds {self.max_bytes} bytes; submit large data by "
                     "reference (an id, an object-storage key), and big batches in parts")
        for name, value in scope.get("headers", ()):
            if name == b"content-length":
                try:
                    length = int(value)
                except ValueError:
                    return await _send_problem(
                        scope, receive, send, 400, "bad_request",
                        "Content-Length is not a number",
                        errors=[{"location": "header.Content-Length",
                                 "message": "not a number"}])
                if length > self.max_bytes:
                    return await _send_problem(scope, receive, send, 413, "body_too_large",
                                               too_large)
        chunks, total = [], 0
        try:
            async with asyncio.timeout(self.timeout):
                while True:
                    message = await receive()
                    if message["type"] != "http.request":
                        # The client went away before the body was complete: nobody to answer.
                        return
                    body = message.get("body", b"")
                    total += len(body)
                    if total > self.max_bytes:
                        return await _send_problem(scope, receive, send, 413, "body_too_large",
                                                   too_large)
                    chunks.append(body)
                    if not message.get("more_body", False):
                        break
        except TimeoutError:
            return await _send_problem(
                scope, receive, send, 408, "request_timeout",
                f"the request body did not arrive within {self.timeout:g} s of its headers "
                f"({total} bytes came)")
        whole = {"type": "http.request", "body": b"".join(chunks), "more_body": False}
        handed = False

        async def replay():
            nonlocal handed
            if not handed:
                handed = True
                return whole
            return await receive()

        await self.app(scope, replay, send)


class Observe:
    """Counts and times every request by route template (never by raw path: ids would make
    one time series per job), and logs it: failures at INFO and above, the rest at DEBUG."""

    def __init__(self, app, metrics: ApiMetrics):
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        started = time.perf_counter()
        status = 500

        async def observed_send(message):
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, observed_send)
        finally:
            elapsed = time.perf_counter() - started
            route = scope.get("route")
            template = getattr(route, "path", None) or "unmatched"
            self.metrics.observe(scope["method"], template, status, elapsed)
            level = (logging.ERROR if status >= 500 else logging.INFO if status >= 400
                     else logging.DEBUG)
            if logger.isEnabledFor(level):
                # The path only: headers (the token) and bodies are never logged.
                jlog.event(logger, level, "request", f"{scope['method']} {template} {status}",
                           method=scope["method"], path=loggable_path(scope), status=status,
                           duration_ms=round(elapsed * 1000, 2))
