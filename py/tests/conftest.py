"""Shared fixtures: a fresh PostgreSQL database per test session (deployed with sqitch)
and a dedicated Redis database, both real servers, both cleaned up afterwards."""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from pathlib import Path

import psycopg
import pytest
import redis as redis_lib

REPO = Path(__file__).resolve().parents[2]
ADMIN_URL = os.environ.get("JOBFENCE_TEST_ADMIN_URL", "postgresql://root@127.0.0.1:5432/postgres")
REDIS_URL = os.environ.get("JOBFENCE_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")


def sqitch_target(url: str) -> str:
    """sqitch names PostgreSQL targets db:pg://..., libpq names them postgresql://..."""
    return "db:pg://" + url.split("://", 1)[1]


def _server_url(admin_url: str) -> str:
    return admin_url.rsplit("/", 1)[0]


@pytest.fixture(scope="session")
def database_url():
    """A database created for this session, with the sqitch plan deployed and verified."""
    name = f"jobfence_py_{int(time.time())}_{uuid.uuid4().hex[:8]}"
    url = f"{_server_url(ADMIN_URL)}/{name}"
    with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        deployed = subprocess.run(
            ["sqitch", "--quiet", "deploy", "--verify", sqitch_target(url)],
            cwd=REPO, capture_output=True, text=True,
        )
        assert deployed.returncode == 0, f"sqitch deploy failed:\n{deployed.stdout}{deployed.stderr}"
        # The session's own Redis server: its keys may use the plain namespace the tests name
        # with transport.ready_key(queue). A deployment gets a random one
        # (test_redis_namespace.py runs two of them on one Redis database).
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("SELECT jobs.configure_redis('jobfence')")
        yield url
    finally:
        with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def scratch_databases():
    """Fresh, empty databases on the test server, dropped afterwards."""
    made = []

    def make() -> str:
        name = f"jobfence_pkg_{int(time.time())}_{uuid.uuid4().hex[:8]}"
        with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
            admin.execute(f'CREATE DATABASE "{name}"')
        made.append(name)
        return f"{_server_url(ADMIN_URL)}/{name}"

    yield make
    with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
        for name in made:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def clean_db(database_url):
    """Empty job tables before each test; returns the database URL."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("TRUNCATE jobs.event, jobs.job, jobs.job_type, jobs.metric_minute, jobs.schedule, jobs.event_retention, jobs.queue_pause, jobs.queue_pause_log, jobs.kind_limit, jobs.kind_slot, jobs.page RESTART IDENTITY CASCADE")
        # The ids start again at 1: a table reading left by an earlier test would be past them.
        conn.execute("UPDATE jobs.relay_feed SET source = 'notify', read_upto = NULL, horizon_id = NULL, "
                     "horizon_xid = NULL, horizon_source = NULL")
    return database_url


@pytest.fixture
def conn(clean_db):
    """An autocommit connection to the clean test database."""
    with psycopg.connect(clean_db, autocommit=True) as c:
        yield c


@pytest.fixture(scope="session")
def _session_redis_url(tmp_path_factory):
    """JOBFENCE_TEST_REDIS_URL when set; otherwise a redis-server of this test session on a
    free port, so that concurrent test runs on one machine never flush each other's ids."""
    if "JOBFENCE_TEST_REDIS_URL" in os.environ:
        yield REDIS_URL
        return
    server = RedisServer(tmp_path_factory.mktemp("redis"))
    server.start()
    try:
        yield server.url
    finally:
        server.stop()


@pytest.fixture
def redis_url(_session_redis_url):
    """A dedicated Redis database, flushed before and after each test."""
    client = redis_lib.Redis.from_url(_session_redis_url)
    client.flushdb()
    try:
        yield _session_redis_url
    finally:
        client.flushdb()
        client.close()


# -- process-level helpers for the driver, end-to-end and CLI tests -------------------------
import json
import signal
import socket
import sys

# Short timings so that lease expiry, retries and reaper ticks happen within seconds.
E2E_TYPE_OPTIONS = {"lease_timeout": 2.0, "timeout": 30.0, "max_retries": 3,
                    "backoff_base": 0.2, "backoff_max": 0.4}


def wait_until(predicate, timeout=20.0, interval=0.05, what="condition"):
    """Poll ``predicate`` until it returns something truthy; fail the test at the deadline."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(interval)
    pytest.fail(f"timed out after {timeout}s waiting for {what} (last value: {last!r})")


# Ports for the servers the tests start, taken below the kernel's ephemeral range
# (net.ipv4.ip_local_port_range starts at 32768): a port the kernel hands out (bind to 0)
# is free only until the next outgoing connection of the suite's many clients takes it as
# its local port, and a server started a moment later then cannot bind it. Never the same
# port twice in one process: three picks in a row can otherwise meet.
_PORTS = range(20000, 32768)
_handed_out: set[int] = set()


def _free_port(pair_offset: int | None = None) -> int:
    """A port no process listens on, below the ephemeral range. With ``pair_offset``, one
    whose ``port + pair_offset`` is free and below it too (a Redis Cluster node's bus port)."""
    import random

    top = _PORTS.stop - (pair_offset or 0)
    for _ in range(500):
        port = random.randrange(_PORTS.start, top)
        wanted = (port,) if pair_offset is None else (port, port + pair_offset)
        if _handed_out.intersection(wanted):
            continue
        try:
            for candidate in wanted:
                with socket.socket() as s:
                    s.bind(("127.0.0.1", candidate))
        except OSError:
            continue
        _handed_out.update(wanted)
        return port
    raise RuntimeError(f"no free port in {_PORTS.start}-{_PORTS.stop - 1}")


class RedisServer:
    """A private redis-server on a free port, which a test may stop and start at will."""

    def __init__(self, workdir: Path):
        self.port = _free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.workdir = workdir
        self.proc = None

    def start(self):
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", str(self.workdir)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        client = redis_lib.Redis(port=self.port)
        try:
            wait_until(lambda: self._ping(client), 10, what="redis-server to answer")
        finally:
            client.close()

    @staticmethod
    def _ping(client):
        try:
            return client.ping()
        except redis_lib.RedisError:
            return False

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self.proc = None

    def client(self):
        return redis_lib.Redis.from_url(self.url)


@pytest.fixture
def redis_server(tmp_path):
    server = RedisServer(tmp_path)
    server.start()
    try:
        yield server
    finally:
        server.stop()


class Proc:
    """A jobfence process (``python -m jobfence ...``) logging JSON lines to a file."""

    def __init__(self, name, args, env, logdir: Path):
        self.name = name
        self.log_path = logdir / f"{name}.log"
        self._log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "jobfence", "--log-format", "json", *args],
            env=env, stdout=self._log, stderr=subprocess.STDOUT, cwd=REPO)
        self.pid = self.proc.pid

    def events(self):
        out = []
        with open(self.log_path) as f:
            for line in f:
                line = line.strip()
                if line.startswith("{"):
                    try:
                        out.append(json.loads(line))
                    except json.JSONDecodeError:
                        pass  # a line still being written
        return out

    def find(self, event, **match):
        return [e for e in self.events() if e.get("event") == event
                and all(e.get(k) == v for k, v in match.items())]

    def wait_for(self, event, timeout=20.0, **match):
        return wait_until(lambda: self.find(event, **match), timeout,
                          what=f"{self.name}: event {event} {match or ''}\n{self.tail()}")

    def tail(self, n=30):
        try:
            return "".join(open(self.log_path).readlines()[-n:])
        except OSError:
            return ""

    def signal(self, sig):
        self.proc.send_signal(sig)

    def wait(self, timeout):
        return self.proc.wait(timeout)

    def alive(self):
        return self.proc.poll() is None

    def kill(self):
        if self.proc.poll() is None:
            try:
                self.proc.send_signal(signal.SIGCONT)
                self.proc.kill()
                self.proc.wait(10)
            except ProcessLookupError:
                pass
        self._log.close()


@pytest.fixture
def procs(tmp_path, clean_db, redis_url):
    """Start jobfence subprocesses against the test database; all killed at teardown."""

    class Procs:
        def __init__(self):
            self.started = []
            self.database_url = clean_db
            self.redis_url = redis_url
            self.env = dict(os.environ, JOBFENCE_DATABASE_URL=clean_db,
                            JOBFENCE_REDIS_URL=redis_url)
            for key, value in E2E_TYPE_OPTIONS.items():
                self.env[f"JOBFENCE_EXAMPLE_{key.upper()}"] = str(value)

        def start(self, name, *args, env=None):
            p = Proc(name, list(args), dict(self.env, **(env or {})), tmp_path)
            self.started.append(p)
            return p

        def worker(self, name, *extra, ready=True, env=None):
            # Per-job lines (claimed, completed, ...) are DEBUG; tests follow single jobs.
            env = {"JOBFENCE_LOG_LEVEL": "DEBUG", **(env or {})}
            p = self.start(name, "worker", "--app", "jobfence.examples:app", "--name", name,
                           "--pop-timeout", "0.2", *extra, env=env)
            if ready:
                p.wait_for("worker_ready")
            return p

        def reaper(self, *extra, env=None):
            p = self.start("reaper", "reaper", "--interval", "0.3", "--stale-after", "0.5",
                           *extra, env=env)
            p.wait_for("reaper_ready")
            return p

        def use_redis(self, url):
            self.redis_url = url
            self.env["JOBFENCE_REDIS_URL"] = url

    p = Procs()
    try:
        yield p
    finally:
        for proc in p.started:
            proc.kill()


@pytest.fixture
def declared(clean_db):
    """Declare the example kinds with the short test timings; create the effect table."""
    from jobfence.db import Database
    from jobfence.examples import CREATE_EFFECT_TABLE, EFFECT_TABLE, app

    db = Database(clean_db, max_size=1, open_timeout=10)
    try:
        for kind in app.tasks:
            db.define_type(kind, **E2E_TYPE_OPTIONS)
        with db.connection() as c:
            c.execute(CREATE_EFFECT_TABLE)
            c.execute(f"TRUNCATE {EFFECT_TABLE}")
    finally:
        db.close()
    return clean_db


@pytest.fixture
def client(declared, redis_url):
    from jobfence import Client

    with Client(declared, redis_url) as c:
        yield c
