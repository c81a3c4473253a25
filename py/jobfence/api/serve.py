"""uvicorn as ``jobfence api`` runs it, with the bounds uvicorn leaves open.

uvicorn closes a connection that stays silent after a response (``timeout_keep_alive``), but
it waits for the headers of a request for ever, and a client that sends a byte now and then
resets even that timer: a few hundred such connections held the API for as long as they
liked. ``BoundedHttp`` gives each request ``header_timeout`` seconds, counted from the
connection's opening or from the previous response and never reset by more data, and at most
``max_header_bytes`` before its headers are complete. The body has its own bound, in
``middleware.BodyLimit``.
"""

from __future__ import annotations

from http import HTTPStatus

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from .problems import MEDIA_TYPE, problem_body

DEFAULT_HEADER_TIMEOUT = 10.0
# Far above a browser's headers with the dashboard's cookie and a bearer token.
DEFAULT_MAX_HEADER_BYTES = 32 * 1024
KEEP_ALIVE_SECONDS = 5.0
GRACEFUL_SHUTDOWN_SECONDS = 5


def _raw_problem(status: int, name: str, detail: str) -> bytes:
    body = problem_body(status, name, detail)
    head = (f"HTTP/1.1 {status} {HTTPStatus(status).phrase}\r\n"
            f"content-type: {MEDIA_TYPE}\r\ncontent-length: {len(body)}\r\n"
            "connection: close\r\n\r\n")
    return head.encode("ascii") + body


def bounded_protocol(header_timeout: float, max_header_bytes: int) -> type:
    """The httptools protocol of uvicorn (what it picks itself when httptools is installed, a
    dependency of jobfence) with the header bounds."""

    class BoundedHttp(HttpToolsProtocol):
        def connection_made(self, transport) -> None:
            self._header_timer = None
            self._header_bytes = 0
            super().connection_made(transport)
            self._arm_header_timer()

        def _awaiting_headers(self) -> bool:
            # Between requests: none yet, or the last one answered (a pipelined request
            # whose headers arrived already has a cycle of its own that is not complete).
            return self.cycle is None or self.cycle.response_complete

        def _arm_header_timer(self) -> None:
            self._disarm_header_timer()
            self._header_bytes = 0
            self._header_timer = self.loop.call_later(header_timeout, self._headers_late)

        def _disarm_header_timer(self) -> None:
            if self._header_timer is not None:
                self._header_timer.cancel()
                self._header_timer = None

        def _refuse(self, status: int, name: str, detail: str) -> None:
            self._disarm_header_timer()
            self.transport.write(_raw_problem(status, name, detail))
            self.transport.close()

        def _headers_late(self) -> None:
            self._header_timer = None
            if self.transport.is_closing() or not self._awaiting_headers():
                return
            if self._header_bytes == 0:
                # An idle connection (a browser's spare one): nothing was asked, so nothing
                # is answered.
                self.transport.close()
                return
            self._refuse(408, "request_timeout",
                         f"the request's headers did not arrive within {header_timeout:g} s")

        def data_received(self, data: bytes) -> None:
            waiting = self._awaiting_headers()
            super().data_received(data)
            if not waiting or self.transport.is_closing() or not self._awaiting_headers():
                return
            self._header_bytes += len(data)
            if self._header_bytes > max_header_bytes:
                self._refuse(431, "headers_too_large",
                             f"the request's headers exceed {max_header_bytes} bytes")

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                self._arm_header_timer()

        def connection_lost(self, exc) -> None:
            self._disarm_header_timer()
            super().connection_lost(exc)

    return BoundedHttp


def server_config(app, *, header_timeout: float = DEFAULT_HEADER_TIMEOUT,
                  max_header_bytes: int = DEFAULT_MAX_HEADER_BYTES,
                  limit_concurrency: int | None = None):
    import uvicorn

    # log_config=None: uvicorn's own lines go through jobfence's formatter; no access log
    # (the Observe middleware logs requests without headers, so no token reaches a log).
    # ws="none": nothing here speaks WebSocket, so an Upgrade is never taken.
    return uvicorn.Config(app, http=bounded_protocol(header_timeout, max_header_bytes),
                          ws="none", log_config=None, access_log=False, lifespan="on",
                          timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_SECONDS,
                          timeout_keep_alive=KEEP_ALIVE_SECONDS, server_header=False,
                          limit_concurrency=limit_concurrency)
