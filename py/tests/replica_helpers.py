"""A private primary and a streaming hot standby on loopback, started and stopped by the
tests themselves (initdb, pg_basebackup -R), so observation through a read-only URL is
tested against a real replica without touching the machine's own cluster."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import psycopg

from conftest import _free_port

BIN = Path("/usr/lib/postgresql") / (sorted(os.listdir("/usr/lib/postgresql"))[-1]
                                     if os.path.isdir("/usr/lib/postgresql") else "15") / "bin"
ACCOUNT = "postgres"


def _as_account(command: list[str]) -> list[str]:
    # PostgreSQL refuses to run as root: its system account runs the private servers.
    return ["runuser", "-u", ACCOUNT, "--"] + command if os.geteuid() == 0 else command


class ReplicatedPair:
    def __init__(self, workdir: Path):
        self.dir = workdir
        self.primary_port = _free_port()
        self.standby_port = _free_port()
        self.primary_dir = workdir / "primary"
        self.standby_dir = workdir / "standby"
        self.user = ACCOUNT if os.geteuid() == 0 else os.environ.get("USER", "postgres")

    def url(self, port: int, dbname: str = "postgres") -> str:
        return f"postgresql://{self.user}@127.0.0.1:{port}/{dbname}"

    def _run(self, *command: str) -> None:
        done = subprocess.run(_as_account(list(command)), capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise RuntimeError(f"{command[0]} failed: {done.stdout}{done.stderr}")

    def _start(self, data: Path, port: int) -> None:
        self._run(str(BIN / "pg_ctl"), "-D", str(data), "-l", str(data / "server.log"), "-w",
                  "-o", f"-p {port} -k {self.dir} -c listen_addresses=127.0.0.1", "start")

    def start(self) -> "ReplicatedPair":
        self.dir.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            shutil.chown(self.dir, ACCOUNT)
        self._run(str(BIN / "initdb"), "-D", str(self.primary_dir), "-A", "trust", "-U", self.user,
                  "--no-sync")
        with open(self.primary_dir / "postgresql.conf", "a") as conf:
            conf.write("wal_level = replica\nmax_wal_senders = 4\nfsync = off\n")
        with open(self.primary_dir / "pg_hba.conf", "a") as hba:
            hba.write("host replication all 127.0.0.1/32 trust\n")
        self._start(self.primary_dir, self.primary_port)
        self._run(str(BIN / "pg_basebackup"), "-h", "127.0.0.1", "-p", str(self.primary_port),
                  "-U", self.user, "-D", str(self.standby_dir), "-R", "-X", "stream")
        self._start(self.standby_dir, self.standby_port)
        return self

    def wait_replayed(self, dbname: str, timeout: float = 30.0) -> None:
        """Until the standby has replayed everything the primary has written so far."""
        with psycopg.connect(self.url(self.primary_port, dbname), autocommit=True) as p:
            target = p.execute("SELECT pg_current_wal_lsn()").fetchone()[0]
        deadline = time.monotonic() + timeout
        while True:
            try:
                with psycopg.connect(self.url(self.standby_port, dbname), autocommit=True) as s:
                    if s.execute("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", (target,)).fetchone()[0]:
                        return
            except psycopg.OperationalError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError("the standby did not catch up")
            time.sleep(0.05)

    def stop(self) -> None:
        for data in (self.standby_dir, self.primary_dir):
            if (data / "postmaster.pid").exists():
                subprocess.run(_as_account([str(BIN / "pg_ctl"), "-D", str(data), "-m", "immediate",
                                            "-w", "stop"]), capture_output=True, timeout=60)
