"""The servers a chaos run owns or disturbs: its scratch database (created, deployed with
sqitch, dropped), its own redis-server child (so it may flush, stop and restart it), and the
local PostgreSQL cluster it may restart — which it always leaves running."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
import uuid
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
import redis

from jobfence.supervisor import die_with_parent


class SetupError(Exception):
    """The run cannot start (no sqitch, no redis-server, server unreachable)."""


def repo_root() -> Path | None:
    for base in (Path.cwd(), Path(__file__).resolve().parents[3]):
        if (base / "sqitch.plan").exists():
            return base
    return None


def with_database(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path="/" + name))


def with_port(url: str, host: str, port: int) -> str:
    parts = urlsplit(url)
    user = parts.username
    auth = f"{user}@" if user else ""
    if parts.password:
        auth = f"{user}:{parts.password}@"
    return urlunsplit(parts._replace(netloc=f"{auth}{host}:{port}"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(predicate, timeout: float, interval: float = 0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = predicate()
        if found:
            return found
        time.sleep(interval)
    return None


class ScratchDatabase:
    def __init__(self, admin_url: str):
        self.admin_url = admin_url
        self.name = f"jobfence_chaos_{int(time.time())}_{uuid.uuid4().hex[:6]}"
        self.url = with_database(admin_url, self.name)
        self.created = False

    def create(self) -> None:
        sqitch = shutil.which("sqitch")
        root = repo_root()
        if sqitch is None or root is None:
            raise SetupError("sqitch (and the repository's sqitch.plan) are needed to deploy "
                             "the run's database")
        try:
            with psycopg.connect(self.admin_url, autocommit=True, connect_timeout=5) as admin:
                admin.execute(f'CREATE DATABASE "{self.name}"')
        except psycopg.OperationalError as exc:
            raise SetupError("PostgreSQL unavailable: " + " ".join(str(exc).split())) from None
        self.created = True
        target = "db:pg://" + self.url.split("://", 1)[1]
        done = subprocess.run([sqitch, "--quiet", "deploy", target], cwd=root,
                              capture_output=True, text=True)
        if done.returncode != 0:
            raise SetupError(f"sqitch deploy failed: {(done.stderr or done.stdout).strip()[:500]}")

    def drop(self) -> None:
        if not self.created:
            return

        def dropped():
            try:
                with psycopg.connect(self.admin_url, autocommit=True, connect_timeout=5) as admin:
                    admin.execute(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')
                return True
            except psycopg.OperationalError:
                return False  # PostgreSQL still coming back from a restart

        wait_for(dropped, 30, 0.5)


class RedisChild:
    """A redis-server of this run on a free port; stop and start keep the port."""

    def __init__(self, workdir: Path):
        if shutil.which("redis-server") is None:
            raise SetupError("redis-server is not on PATH (Debian: apt-get install redis-server)")
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.workdir = workdir
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", str(self.workdir)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
            # Not in the runner's process group (a ctrl+c is the runner's to handle), but
            # ended by Linux if the runner is killed outright.
            preexec_fn=die_with_parent)
        if not wait_for(self.ping, 10):
            raise SetupError(f"redis-server did not answer on port {self.port}")

    def ping(self) -> bool:
        client = redis.Redis(port=self.port, socket_timeout=1, socket_connect_timeout=1)
        try:
            return bool(client.ping())
        except redis.RedisError:
            return False
        finally:
            client.close()

    def flushall(self) -> None:
        client = redis.Redis(port=self.port, socket_timeout=2)
        try:
            client.flushall()
        finally:
            client.close()

    def corrupt(self, queue: str, namespace: str) -> dict:
        """What a stray client or a bad migration leaves: the queue's delayed set replaced
        by a string (the delayed signals in it are lost with it), and junk in its ready
        list — members that are no job id, one not even UTF-8."""
        from jobfence.transport import delayed_key, ready_key

        client = redis.Redis(port=self.port, socket_timeout=2)
        try:
            delayed, ready = delayed_key(queue, 0, namespace), ready_key(queue, 0, namespace)
            lost = client.zcard(delayed) if client.type(delayed) == b"zset" else 0
            client.set(delayed, b"not a zset")
            junk = [b"not-an-id", b"-5", b"\xff\xfe", b"0", b"99999999999999999999999"]
            client.rpush(ready, *junk)
        finally:
            client.close()
        return {"queue": queue, "delayed_signals_lost": int(lost), "junk_members": len(junk)}

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self.proc = None


class LocalPostgres:
    """Restarts of the cluster that serves the run, when it runs on this machine."""

    def __init__(self, url: str):
        self.host = urlsplit(url).hostname or "localhost"
        versions = sorted(os.listdir("/etc/postgresql")) if os.path.isdir("/etc/postgresql") else []
        self.version = versions[-1] if versions else None
        self.tool = shutil.which("pg_ctlcluster")
        self.restarted = False

    def why_not(self) -> str | None:
        if self.host not in ("127.0.0.1", "localhost", "::1", "") and not self.host.startswith("/"):
            return f"PostgreSQL at {self.host} is not on this machine"
        if self.tool is None or self.version is None:
            return "pg_ctlcluster or /etc/postgresql not found"
        return None

    def _ctl(self, action: str) -> subprocess.CompletedProcess:
        return subprocess.run([self.tool, "--skip-systemctl-redirect", self.version, "main",
                               action], capture_output=True, text=True, timeout=120)

    def restart(self) -> str | None:
        """Restart; returns an error text, None on success."""
        self.restarted = True
        done = self._ctl("restart")
        return None if done.returncode == 0 else (done.stderr or done.stdout).strip()[:300]

    def running(self) -> bool:
        return self._ctl("status").returncode == 0

    def ensure_running(self) -> None:
        """Whatever happened, leave the cluster up (start is a no-op error when it runs)."""
        if self.tool is None or self.version is None or not self.restarted:
            return
        if not self.running():
            self._ctl("start")
