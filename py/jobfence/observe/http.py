"""Serving a registry over HTTP for Prometheus (``/metrics``, any path answers)."""

from __future__ import annotations

import errno

from prometheus_client import REGISTRY, start_http_server


class ListenError(Exception):
    """The metrics port cannot be listened on (in use, not permitted, bad address)."""


def serve(port: int, host: str = "127.0.0.1", registry=REGISTRY):
    """Start the HTTP server on a daemon thread; returns the server (``.shutdown()``)."""
    try:
        server, _thread = start_http_server(port, addr=host, registry=registry)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            reason = "address already in use (another process listens there)"
        elif exc.errno == errno.EACCES:
            reason = "permission denied (ports below 1024 need privileges)"
        else:
            reason = exc.strerror or str(exc)
        raise ListenError(f"cannot listen for metrics on {host}:{port}: {reason}") from None
    return server
