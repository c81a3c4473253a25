"""What a web page the user visits can make their browser do to a `jobfence api` on their
own machine (docs/security.md, "Browsers and slow clients"), and the bounds on clients that
send slowly: real `jobfence api` subprocesses, raw sockets where the bytes matter."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

import pytest

from api_helpers import ADMIN_TOKEN, PRODUCER_TOKEN, TOKENS, job_rows, start_api, status_of
from conftest import REPO, _free_port, wait_until

PROBLEM = "application/problem+json"
EVIL = "http://evil.example"


def assert_problem(answer, status, name):
    assert answer.status == status, (answer.status, answer.raw[:500])
    assert answer.media_type == PROBLEM, answer.headers
    assert answer.data["status"] == status and answer.data["name"] == name, answer.data
    return answer.data


@pytest.fixture
def open_api(procs, declared):
    return start_api(procs, "--no-auth", name="api-open", tokens=None, token=None)


def _queued_job(api) -> int:
    answer = api.post("/jobs", {"kind": "noop", "run_after": 3600})
    assert answer.status == 202, answer.raw
    return answer.data["id"]


# -- forms and no-cors fetches of another site ------------------------------------------------
def test_a_cross_site_form_or_fetch_changes_nothing_on_an_open_api(open_api, declared):
    api = open_api
    job = _queued_job(api)
    before = job_rows(declared)
    form = "application/x-www-form-urlencoded"
    # <form method=post action=.../cancel>: a form type, and the page's Origin.
    assert_problem(api.post(f"/jobs/{job}/cancel", raw=b"", headers={
        "Content-Type": form, "Origin": EVIL}), 403, "origin_not_allowed")
    # The same without an Origin (a client that is no browser) still lacks the JSON type.
    refused = assert_problem(api.post(f"/jobs/{job}/cancel", raw=b"", headers={
        "Content-Type": form}), 415, "unsupported_media_type")
    assert refused["errors"][0]["location"] == "header.Content-Type"
    # An empty POST without any Content-Type: 200 and a cancelled job before.
    refused = assert_problem(api.post(f"/jobs/{job}/cancel", headers={"Content-Type": None}),
                             415, "unsupported_media_type")
    assert "even without a body" in refused["errors"][0]["message"]
    # fetch(url, {mode: 'no-cors', body: new Blob([json])}): JSON with no Content-Type.
    body = json.dumps({"kind": "noop"}).encode()
    assert_problem(api.post("/jobs", raw=body, headers={"Content-Type": None}),
                   415, "unsupported_media_type")
    assert_problem(api.post("/jobs", raw=body, headers={"Content-Type": "text/plain"}),
                   415, "unsupported_media_type")
    # A page that could send JSON (it cannot without a preflight) is refused by its Origin;
    # so is a sandboxed frame's or a file's "null".
    for origin in (EVIL, f"http://evil.example:{api.port}", "null", "file://",
                   f"http://localhost:{api.port + 1}"):
        assert_problem(api.post("/jobs", {"kind": "noop"}, headers={"Origin": origin}),
                       403, "origin_not_allowed")
    for method, path in (("POST", f"/jobs/{job}/replay"), ("POST", "/queues/default/pause"),
                         ("POST", "/queues/default/resume"), ("DELETE", "/schedules/none")):
        assert_problem(api.call(method, path, headers={"Content-Type": None}),
                       415, "unsupported_media_type")
        assert_problem(api.call(method, path, headers={"Origin": EVIL}),
                       403, "origin_not_allowed")
    assert job_rows(declared) == before and status_of(declared, job) == "queued"
    assert api.get("/queues").data is not None
    # Reads stay open to any Origin: without CORS headers the page cannot read the answer.
    assert api.get(f"/jobs/{job}", headers={"Origin": EVIL}).status == 200
    # The server's own origin, as a browser on the dashboard would send it.
    for host in (f"127.0.0.1:{api.port}", f"localhost:{api.port}"):
        own = api.post(f"/jobs/{job}/cancel", {"reason": "own origin"},
                       headers={"Host": host, "Origin": f"http://{host}"})
        assert own.status in (200, 409), own.raw
    assert status_of(declared, job) == "failed"


# -- Host allow-list (DNS rebinding) ----------------------------------------------------------
def _raw(port: int, request: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(request)
        data = b""
        while True:
            more = s.recv(65536)
            if not more:
                return data
            data += more


def test_a_foreign_host_is_answered_nowhere(open_api, declared):
    api = open_api
    job = _queued_job(api)
    before = job_rows(declared)
    for path in (f"/jobs/{job}", "/jobs", "/healthz", "/openapi.json", "/ui", "/ui/login",
                 "/ui/static/app.css", "/metrics", "/nowhere"):
        refused = assert_problem(api.get(path, headers={"Host": "evil.example"}),
                                 421, "host_not_allowed")
        assert "JOBFENCE_API_ALLOWED_HOSTS" in refused["detail"], refused
        assert "noop" not in json.dumps(refused) and "jobs" not in refused
    for host in ("evil.example:%d" % api.port, "127.0.0.1.evil.example", "localhost.evil",
                 "127.0.0.2", "[::2]", "", "a b"):
        assert_problem(api.get("/healthz", headers={"Host": host}), 421, "host_not_allowed")
    assert_problem(api.post("/jobs", {"kind": "noop"}, headers={"Host": "evil.example"}),
                   421, "host_not_allowed")
    assert_problem(api.post(f"/jobs/{job}/cancel", headers={"Host": "evil.example"}),
                   421, "host_not_allowed")
    assert job_rows(declared) == before and status_of(declared, job) == "queued"
    # HTTP/1.0 without any Host.
    answer = _raw(api.port, b"GET /healthz HTTP/1.0\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 421") and b"host_not_allowed" in answer, answer[:300]
    for host in (f"localhost:{api.port}", "localhost", "LOCALHOST.", f"127.0.0.1:{api.port}",
                 f"[::1]:{api.port}", "[::1]"):
        assert api.get("/healthz", headers={"Host": host}).status == 200, host


def test_allowed_hosts_and_origins_come_from_the_environment_and_flags(procs, declared):
    api = start_api(procs, "--allowed-host", "jobs.internal",
                    "--allowed-origin", "https://console.example.com",
                    env={"JOBFENCE_API_ALLOWED_HOSTS": "api, .example.com",
                         "JOBFENCE_API_ALLOWED_ORIGINS": "http://localhost:3000"})
    for host in ("api", "api:8000", "example.com", "jobs.example.com:443", "a.b.example.com",
                 "jobs.internal", f"127.0.0.1:{api.port}"):
        assert api.get("/jobs", headers={"Host": host}).status == 200, host
    for host in ("notexample.com", "example.com.evil", "api.internal", "internal"):
        assert_problem(api.get("/jobs", headers={"Host": host}), 421, "host_not_allowed")
    before = job_rows(declared)
    for origin in ("https://console.example.com", "http://localhost:3000", "http://api:8000"):
        answer = api.post("/jobs", {"kind": "noop"},
                          headers={"Host": "api:8000", "Origin": origin})
        assert answer.status == 202, (origin, answer.raw)
    for origin in ("http://console.example.com", "https://other.example.com",
                   "http://localhost:3001"):
        assert_problem(api.post("/jobs", {"kind": "noop"},
                                headers={"Host": "api:8000", "Origin": origin}),
                       403, "origin_not_allowed")
    assert job_rows(declared) == before + 3
    listening = api.proc.find("api_listening")[0]
    assert "jobs.internal" in listening["allowed_hosts"], listening

    anyhost = start_api(procs, name="api-any", env={"JOBFENCE_API_ALLOWED_HOSTS": "*"})
    assert anyhost.get("/jobs", headers={"Host": "whatever.example"}).status == 200


def _api_command(env_extra, *args, command="api"):
    env = {k: v for k, v in os.environ.items()
           if k not in ("JOBFENCE_API_TOKENS", "JOBFENCE_API_ALLOWED_HOSTS",
                        "JOBFENCE_API_ALLOWED_ORIGINS")}
    env.update(env_extra)
    return subprocess.run([sys.executable, "-m", "jobfence", command, *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=60)


def _one_line_exit_2(out, *expected: str) -> str:
    assert out.returncode == 2, (out.returncode, out.stdout, out.stderr)
    text = out.stderr.strip()
    assert "Traceback" not in text and len(text.splitlines()) == 1, text
    for fragment in expected:
        assert fragment in text, text
    return text


def test_the_api_refuses_a_short_token_and_an_unreadable_allow_list_at_start(declared,
                                                                                redis_url):
    base = {"JOBFENCE_DATABASE_URL": declared, "JOBFENCE_REDIS_URL": redis_url}
    short = "abc123"
    for tokens in (short, f"{PRODUCER_TOKEN},{short}:admin", "x" * 15):
        text = _one_line_exit_2(_api_command({**base, "JOBFENCE_API_TOKENS": tokens},
                                             "--port", "0"), "at least 16 characters")
        assert short not in text and "x" * 15 not in text
    # jobfence run says it once, before any child starts.
    text = _one_line_exit_2(_api_command({**base, "JOBFENCE_API_TOKENS": f"{short}:admin"},
                                         "--workers", "1", command="run"), "at least 16")
    assert short not in text
    for env, args, expected in (
            ({"JOBFENCE_API_ALLOWED_HOSTS": "http://api/"}, (), "JOBFENCE_API_ALLOWED_HOSTS"),
            ({"JOBFENCE_API_ALLOWED_HOSTS": "api:8000"}, (), "without scheme or port"),
            ({}, ("--allowed-host", "a b"), "--allowed-host"),
            ({"JOBFENCE_API_ALLOWED_ORIGINS": "evil.example"}, (), "not an origin"),
            ({}, ("--allowed-origin", "https://x.example/path"), "--allowed-origin")):
        _one_line_exit_2(_api_command({**base, "JOBFENCE_API_TOKENS": TOKENS, **env},
                                      "--port", "0", *args), expected)
    # Any Host without tokens would let a DNS-rebound page in.
    _one_line_exit_2(_api_command({**base, "JOBFENCE_API_ALLOWED_HOSTS": "*"},
                                  "--no-auth", "--port", "0"), "DNS rebinding")
    _one_line_exit_2(_api_command({**base, "JOBFENCE_API_ALLOWED_HOSTS": "*"}, "--workers",
                                  "1", command="run"), "DNS rebinding")


def test_the_dashboard_takes_the_allowed_origins_too(procs, declared):
    api = start_api(procs, "--no-auth", name="api-ui", tokens=None, token=None,
                    env={"JOBFENCE_API_ALLOWED_ORIGINS": "https://console.example.com"})
    job = _queued_job(api)
    page = api.get(f"/ui/jobs/{job}/confirm?action=cancel")
    assert page.status == 200, page.raw[:300]
    csrf = page.raw.decode().split('name="csrf" value="', 1)[1].split('"', 1)[0]
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    foreign = api.post(f"/ui/jobs/{job}/cancel", raw=f"csrf={csrf}".encode(),
                       headers={**form, "Origin": EVIL})
    assert foreign.status == 403 and status_of(declared, job) == "queued"
    allowed = api.post(f"/ui/jobs/{job}/cancel", raw=f"csrf={csrf}".encode(),
                       headers={**form, "Origin": "https://console.example.com"})
    assert allowed.status in (200, 303), (allowed.status, allowed.raw[:300])
    assert status_of(declared, job) == "failed"


# -- slow clients -----------------------------------------------------------------------------
def _closed_within(sock, seconds: float) -> bytes:
    """What the server sent before it closed the connection; fails the test if it is still
    open at the deadline."""
    deadline = time.monotonic() + seconds
    data = b""
    while time.monotonic() < deadline:
        sock.settimeout(max(0.05, deadline - time.monotonic()))
        try:
            more = sock.recv(65536)
        except socket.timeout:
            continue
        except ConnectionResetError:
            return data
        if not more:
            return data
        data += more
    pytest.fail(f"the connection was still open after {seconds} s; received {data[:200]!r}")


def test_connections_that_send_slowly_are_closed(procs, declared):
    api = start_api(procs, "--header-timeout", "1", "--body-timeout", "1")
    host = f"Host: 127.0.0.1:{api.port}\r\n".encode()
    auth = f"Authorization: Bearer {PRODUCER_TOKEN}\r\n".encode()
    # Connected, nothing sent (before: held for ever): closed without an answer.
    with socket.create_connection(("127.0.0.1", api.port)) as s:
        assert _closed_within(s, 20) == b""
    # Headers begun, never ended: a 408 problem, then closed.
    with socket.create_connection(("127.0.0.1", api.port)) as s:
        s.sendall(b"GET /healthz HTTP/1.1\r\n" + host)
        answer = _closed_within(s, 20)
    assert answer.startswith(b"HTTP/1.1 408") and b"request_timeout" in answer, answer[:300]
    # The same after a first request on a kept-alive connection.
    with socket.create_connection(("127.0.0.1", api.port)) as s:
        s.sendall(b"GET /healthz HTTP/1.1\r\n" + host + b"\r\n")
        s.settimeout(10)
        first = s.recv(65536)
        assert first.startswith(b"HTTP/1.1 200"), first[:200]
        s.sendall(b"GET /healthz HTTP/1.1\r\n" + host)
        answer = _closed_within(s, 20)
    assert b"HTTP/1.1 408" in answer, answer[:300]
    # A body promised and not sent: 408 once the body timeout passes.
    before = job_rows(declared)
    with socket.create_connection(("127.0.0.1", api.port)) as s:
        s.sendall(b"POST /jobs HTTP/1.1\r\n" + host + auth +
                  b"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"kind\"")
        answer = _closed_within(s, 20)
    assert answer.startswith(b"HTTP/1.1 408") and b"request_timeout" in answer, answer[:300]
    assert job_rows(declared) == before
    # Headers without end: 431 once they pass 32 KiB.
    with socket.create_connection(("127.0.0.1", api.port)) as s:
        s.sendall(b"GET /healthz HTTP/1.1\r\n" + host)
        try:
            for n in range(100):
                s.sendall(b"X-Filler-%d: %s\r\n" % (n, b"y" * 1000))
        except OSError:
            pass  # closed as soon as it answered
        answer = _closed_within(s, 20)
    assert answer.startswith(b"HTTP/1.1 431") and b"headers_too_large" in answer, answer[:300]
    # A request whose headers arrived is not cut by the header timeout: a long poll longer
    # than it answers.
    job = _queued_job(api)
    waited = api.get(f"/jobs/{job}?wait=2")
    assert waited.status == 200 and waited.data["status"] == "queued"
    assert api.proc.alive()


def test_the_server_config_sets_the_bounds_uvicorn_leaves_open():
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    from jobfence.api import create_app
    from jobfence.api.serve import server_config

    config = server_config(create_app(), header_timeout=3, limit_concurrency=50)
    assert issubclass(config.http, HttpToolsProtocol)
    assert config.timeout_keep_alive == 5 and config.ws == "none"
    assert config.limit_concurrency == 50 and config.server_header is False
    assert server_config(create_app()).limit_concurrency is None


def test_every_state_changing_route_documents_415_and_403():
    doc = json.loads((REPO / "docs" / "openapi.json").read_text())
    changing = [(path, method) for path, ops in doc["paths"].items() for method in ops
                if method in ("post", "put", "patch", "delete")]
    assert len(changing) >= 10
    for path, method in changing:
        answers = doc["paths"][path][method]["responses"]
        assert "415" in answers and "403" in answers, (path, method, sorted(answers))
        assert "Origin" in answers["403"]["description"]
