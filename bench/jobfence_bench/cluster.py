"""A throw-away PostgreSQL cluster of the bench's own (initdb in a temporary directory, a free
port, trust authentication): what bench/instructions runs under callgrind and
bench/statements runs with pg_stat_statements, neither of which the shared server allows
(both need a server started for them). Deploying the working tree's plan and copying it into
variant databases are here too, so both tools measure the same schema the same way."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, TypeVar

import psycopg

from .common import ROOT, progress

T = TypeVar("T")

PG_BIN = Path("/usr/lib/postgresql")


def pg_bin(name: str) -> str:
    found = sorted(PG_BIN.glob(f"*/bin/{name}"))
    if not found:
        sys.exit(f"bench: no {name} under {PG_BIN}")
    return str(found[-1])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    """initdb, start, stop. `settings` are appended to postgresql.conf before the first start."""

    def __init__(self, work: Path, settings: str = ""):
        self.work = work
        self.port = _free_port()
        self.data = work / "data"
        self.settings = settings
        self.proc: subprocess.Popen | None = None
        # PostgreSQL refuses to run as root: the cluster belongs to the postgres user then.
        self.user = "postgres" if os.geteuid() == 0 else None

    def _as_owner(self, argv: list[str]) -> list[str]:
        return ["runuser", "-u", self.user, "--", *argv] if self.user else argv

    def init(self) -> None:
        if self.user:
            shutil.chown(self.work, user=self.user)
        subprocess.run(self._as_owner([pg_bin("initdb"), "-D", str(self.data), "-A", "trust", "-U", "root"]),
                       check=True, capture_output=True)
        # The main server's settings that change what a call does (docs/operations.md):
        # synchronous commit as shipped; no autovacuum, so no worker wakes during a measure.
        with open(self.data / "postgresql.conf", "a") as f:
            f.write(f"port = {self.port}\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '{self.work}'\n"
                    "autovacuum = off\nshared_buffers = 128MB\nmax_wal_size = 1GB\n" + self.settings)
        self.start()

    def start(self, wrapper: list[str] | None = None) -> None:
        argv = [*(wrapper or []), pg_bin("postgres"), "-D", str(self.data)]
        self.proc = subprocess.Popen(self._as_owner(argv), stdout=subprocess.DEVNULL,
                                     stderr=open(self.work / "server.log", "a"), start_new_session=True)
        deadline = time.monotonic() + 180
        while True:
            try:
                with psycopg.connect(self.url("postgres"), connect_timeout=2):
                    return
            except psycopg.OperationalError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the server did not start; see {self.work}/server.log")
                time.sleep(0.5)

    def url(self, db: str) -> str:
        return f"postgresql://root@127.0.0.1:{self.port}/{db}"

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGINT)  # fast shutdown
            try:
                self.proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.proc = None

    def deploy(self, db: str) -> None:
        """The working tree's plan, into a new database `db`, with the bench's kind declared."""
        with psycopg.connect(self.url("postgres"), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{db}"')
        target = f"db:pg://root@127.0.0.1:{self.port}/{db}"
        out = subprocess.run(["sqitch", "--quiet", "deploy", target], cwd=ROOT, capture_output=True, text=True)
        if out.returncode != 0:
            raise RuntimeError(f"sqitch deploy failed: {out.stderr.strip()[-800:]}")
        with psycopg.connect(self.url(db), autocommit=True) as conn:
            conn.execute("SELECT jobs.define_type('bench')")

    def variant(self, name: str, sql: Path, template: str = "plan") -> None:
        """A copy of `template` with the SQL file `sql` applied: a candidate change."""
        with psycopg.connect(self.url("postgres"), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
        out = subprocess.run(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", self.url(name), "-f", str(sql)],
                             capture_output=True, text=True)
        if out.returncode != 0:
            raise RuntimeError(f"variant {sql}: {out.stderr.strip()[-800:]}")


def measured(tool: str, cluster: Cluster, variants: list[Path], measure: Callable[[dict[str, str]], T]) -> T | None:
    """Starts `cluster`, deploys the plan into database "plan" and each variant into a copy,
    then returns `measure(dbs)`, dbs mapping "plan" and each variant's path to its database.
    The cluster is stopped in every case and its files removed, except when the cluster or a
    call failed: then its message goes to stderr, the files stay for a look, and None is
    returned (the tool exits 1)."""
    # A SIGTERM ends the measure as Ctrl-C does: the cluster stopped, its files removed.
    previous = signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        return _measured(tool, cluster, variants, measure)
    finally:
        signal.signal(signal.SIGTERM, previous)


def _measured(tool: str, cluster: Cluster, variants: list[Path], measure: Callable[[dict[str, str]], T]) -> T | None:
    try:
        progress(f"a private PostgreSQL in {cluster.work} (port {cluster.port}): deploying the plan")
        cluster.init()
        cluster.deploy("plan")
        dbs = {"plan": "plan"}
        for i, v in enumerate(variants, 1):
            cluster.variant(f"variant{i}", v)
            dbs[str(v)] = f"variant{i}"
        result = measure(dbs)
    except (RuntimeError, psycopg.Error, subprocess.CalledProcessError) as exc:
        cluster.stop()
        print(f"{tool}: {exc}\n(the cluster's files are kept in {cluster.work})", file=sys.stderr)
        return None
    except BaseException:
        cluster.stop()
        shutil.rmtree(cluster.work, ignore_errors=True)
        raise
    cluster.stop()
    shutil.rmtree(cluster.work, ignore_errors=True)
    return result
