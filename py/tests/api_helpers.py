"""Driving `jobfence api` subprocesses over real HTTP (http.client: the tests control every
header and byte, which the body-cap and auth tests need)."""

from __future__ import annotations

import http.client
import json
import socket
import uuid
from dataclasses import dataclass, field

import psycopg

PRODUCER_TOKEN = f"producer-{uuid.uuid4().hex}"
ADMIN_TOKEN = f"admin-{uuid.uuid4().hex}"
TOKENS = f"{PRODUCER_TOKEN},{ADMIN_TOKEN}:admin"
STATE_CHANGING = frozenset({"POST", "PUT", "PATCH", "DELETE"})


@dataclass
class Answer:
    status: int
    headers: dict
    raw: bytes
    data: object = field(default=None)

    @property
    def media_type(self) -> str:
        return self.headers.get("content-type", "").split(";")[0].strip()


class Api:
    def __init__(self, proc, port: int, token: str | None = PRODUCER_TOKEN):
        self.proc = proc
        self.port = port
        self.token = token
        self.base = f"http://127.0.0.1:{port}"

    def call(self, method: str, path: str, body=None, *, headers: dict | None = None,
             token: str | None = "default", raw: bytes | None = None,
             timeout: float = 30.0) -> Answer:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        sent = dict(headers or {})
        token = self.token if token == "default" else token
        if token:
            sent.setdefault("Authorization", f"Bearer {token}")
        payload = raw
        if body is not None:
            payload = json.dumps(body).encode()
        if body is not None or method in STATE_CHANGING:
            # The API refuses a state-changing request without it, body or none.
            sent.setdefault("Content-Type", "application/json")
        # A header given as None is not sent (a test of what its absence does).
        sent = {k: v for k, v in sent.items() if v is not None}
        try:
            conn.request(method, path, body=payload, headers=sent)
            response = conn.getresponse()
            data = response.read()
            found = {k.lower(): v for k, v in response.getheaders()}
        finally:
            conn.close()
        answer = Answer(response.status, found, data)
        if data and ("json" in answer.media_type):
            answer.data = json.loads(data)
        return answer

    def get(self, path, **kw):
        return self.call("GET", path, **kw)

    def post(self, path, body=None, **kw):
        return self.call("POST", path, body, **kw)


def start_api(procs, *extra, name="api", env=None, redis_url=None, tokens=TOKENS,
              token=PRODUCER_TOKEN) -> Api:
    env = dict(env or {})
    if tokens is not None:
        env["JOBFENCE_API_TOKENS"] = tokens
    if redis_url is not None:
        env["JOBFENCE_REDIS_URL"] = redis_url
    env.setdefault("JOBFENCE_LOG_LEVEL", "DEBUG")
    p = procs.start(name, "api", "--port", "0", *extra, env=env)
    port = int(p.wait_for("api_listening")[0]["port"])
    return Api(p, port, token)


def closed_port() -> int:
    """A port nothing listens on (bound and released at once)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def job_rows(url: str) -> int:
    with psycopg.connect(url, autocommit=True) as c:
        return c.execute("SELECT count(*) FROM jobs.job").fetchone()[0]


def status_of(url: str, job_id: int) -> str:
    with psycopg.connect(url, autocommit=True) as c:
        return c.execute("SELECT status::text FROM jobs.job WHERE id = %s", (job_id,)).fetchone()[0]
