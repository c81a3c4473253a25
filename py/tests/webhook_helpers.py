"""A local webhook receiver for the dead-letter forwarders, and the forwarder options that
make their retries fast enough for a test."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

FAST = ("--dead-letter-retry-base", "0.05", "--dead-letter-retry-max", "0.2",
        "--dead-letter-timeout", "0.3")


class Hook:
    """A local webhook receiver: records every POST (its Jobfence-Page-Id header and body);
    answers the first ``fail`` ones with ``how``: "503", "302" (a redirect) or "garbage"
    (bytes that are not HTTP); with ``hang_first`` the first request waits for ``release``
    (a forwarder killed while it waits)."""

    def __init__(self, fail: int = 0, how: str = "503", hang_first: bool = False):
        self.bodies: list[dict] = []
        self.received: list[tuple[str, dict]] = []  # every request, delivered or not
        self.attempts = 0
        self.fail = fail
        self.how = how
        self.hang_first = hang_first
        self.hanging = threading.Event()
        self.release = threading.Event()
        self._lock = threading.Lock()
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - the http.server API
                length = int(self.headers["Content-Length"])
                body = json.loads(self.rfile.read(length))
                with hook._lock:
                    hook.attempts += 1
                    attempt = hook.attempts
                    hook.received.append((self.headers.get("Jobfence-Page-Id"), body))
                if attempt == 1 and hook.hang_first:
                    hook.hanging.set()
                    hook.release.wait(30)
                    return
                if attempt <= hook.fail:
                    if hook.how == "garbage":
                        self.wfile.write(b"SSH-2.0-OpenSSH_9.2\r\n")
                        self.close_connection = True
                        return
                    self.send_response(int(hook.how))
                    if hook.how == "302":
                        self.send_header("Location", "/landing")
                    self.end_headers()
                    return
                with hook._lock:
                    hook.bodies.append(body)
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/page"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def jobs(self) -> list[dict]:
        with self._lock:
            return [j for b in self.bodies for j in b["jobs"]]

    def delivered_job_ids(self) -> set[int]:
        return {j["id"] for j in self.jobs()}

    def close(self):
        self.release.set()
        self.server.shutdown()
        self.server.server_close()
