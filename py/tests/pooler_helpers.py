"""A private PgBouncer in transaction mode, started and stopped by the tests themselves, in
front of the test PostgreSQL: every transaction may land on another server session, which
is what the drivers' JOBFENCE_DATABASE_POOLER=transaction mode must survive."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from conftest import _free_port

PGBOUNCER = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"


class PgBouncer:
    def __init__(self, workdir: Path, server_url: str, *, pool_size: int = 3):
        parts = urlsplit(server_url)
        self.server_host = parts.hostname or "127.0.0.1"
        self.server_port = parts.port or 5432
        self.user = parts.username or os.environ.get("USER", "root")
        self.port = _free_port()
        self.dir = workdir
        self.pool_size = pool_size
        self.proc: subprocess.Popen | None = None

    def url(self, database_url: str) -> str:
        """``database_url`` with its host and port replaced by this bouncer's."""
        parts = urlsplit(database_url)
        netloc = f"{parts.username}@127.0.0.1:{self.port}" if parts.username else f"127.0.0.1:{self.port}"
        return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))

    def start(self) -> "PgBouncer":
        self.dir.mkdir(parents=True, exist_ok=True)
        (self.dir / "users.txt").write_text(f'"{self.user}" ""\n')
        ini = self.dir / "pgbouncer.ini"
        # A pool smaller than the clients: transactions of one client keep landing on other
        # server sessions, so anything kept in a session would show.
        ini.write_text(f"""[databases]
* = host={self.server_host} port={self.server_port}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {self.port}
unix_socket_dir =
auth_type = trust
auth_file = {self.dir / 'users.txt'}
pool_mode = transaction
default_pool_size = {self.pool_size}
max_client_conn = 200
logfile = {self.dir / 'pgbouncer.log'}
pidfile = {self.dir / 'pgbouncer.pid'}
""")
        command = [PGBOUNCER, str(ini)]
        if os.geteuid() == 0:
            # PgBouncer refuses to run as root: the PostgreSQL system account runs it.
            shutil.chown(self.dir, "postgres")
            for f in self.dir.iterdir():
                shutil.chown(f, "postgres")
            command = ["runuser", "-u", "postgres", "--"] + command
        self.proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"pgbouncer exited: {self.proc.stderr.read().decode()}\n{self.log()}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return self
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"pgbouncer did not listen on {self.port}\n{self.log()}")

    def log(self) -> str:
        try:
            return (self.dir / "pgbouncer.log").read_text()[-4000:]
        except OSError:
            return ""

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
