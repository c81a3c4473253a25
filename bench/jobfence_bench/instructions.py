"""bench/instructions: the SQL path's server work per job as a count of instructions, from a
private PostgreSQL run under callgrind. The count does not depend on what else the machine
is doing, so a change worth 1 % shows as 1 %, run after run, where CPU seconds on this shared
machine move by a third from one second to the next (docs/performance.md, "Instructions per
job").

Each figure is the difference between two sessions of the same database that ran the same
calls W and W + R times (W rounds plan every statement): start-up, the first plans and the session's end cancel out. The
phases are separate sessions too: submit_many alone, then submit and claim, then the whole
lifecycle; claim = (submit + claim) - submit, complete = lifecycle - (submit + claim).

A variant is a SQL file applied to a copy of the deployed database (CREATE DATABASE ...
TEMPLATE): a candidate change measured beside the working tree's plan, in the same run."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psycopg
from psycopg.types.json import Jsonb

from jobfence import sql

from .common import ROOT, progress

PG_BIN = Path("/usr/lib/postgresql")
# Enough to plan every statement; the short session runs only these.
WARM_JOBS = 300
SUBMIT = "SELECT id FROM jobs.submit_many(%s::jsonb)"
CLAIM = "SELECT job_id, lease_version, token FROM jobs.claim_many_with_token(%b::bigint[], %s)"
# The worker's own completion: the usual outcomes are not sent back.
COMPLETE = sql.COMPLETE_MANY_WITH_TOKEN_UNUSUAL
PHASES = ("submit", "claim", "complete")


def _bin(name: str) -> str:
    found = sorted(PG_BIN.glob(f"*/bin/{name}"))
    if not found:
        sys.exit(f"bench/instructions: no {name} under {PG_BIN}")
    return str(found[-1])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A throw-away cluster whose every process runs under callgrind; each backend writes its
    count to cg.<pid> when its session ends."""

    def __init__(self, work: Path):
        self.work = work
        self.port = _free_port()
        self.data = work / "data"
        self.proc: subprocess.Popen | None = None
        # PostgreSQL refuses to run as root: the cluster belongs to the postgres user then.
        self.user = "postgres" if os.geteuid() == 0 else None

    def _as_owner(self, argv: list[str]) -> list[str]:
        return ["runuser", "-u", self.user, "--", *argv] if self.user else argv

    def init(self) -> None:
        """A new cluster, started without callgrind: deploying the plan runs hundreds of
        sessions, which callgrind would slow fifty-fold for nothing."""
        if self.user:
            shutil.chown(self.work, user=self.user)
        subprocess.run(self._as_owner([_bin("initdb"), "-D", str(self.data), "-A", "trust", "-U", "root"]),
                       check=True, capture_output=True)
        # The main server's settings that change what a call does (docs/operations.md):
        # synchronous commit as shipped; no autovacuum, so no worker wakes during a count.
        with open(self.data / "postgresql.conf", "a") as f:
            f.write(f"port = {self.port}\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '{self.work}'\n"
                    "autovacuum = off\nshared_buffers = 128MB\nmax_wal_size = 1GB\n")
        self._start([_bin("postgres"), "-D", str(self.data)])

    def counting(self) -> None:
        """Restarts the cluster with every process under callgrind."""
        self.stop()
        self._start(["valgrind", "--tool=callgrind", f"--callgrind-out-file={self.work}/cg.%p",
                     _bin("postgres"), "-D", str(self.data)])

    def _start(self, argv: list[str]) -> None:
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

    def count(self, pid: int) -> int:
        """The instructions of a backend that has ended (its count file is written on exit)."""
        path = self.work / f"cg.{pid}"
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if path.exists():
                for line in path.read_text(errors="replace").splitlines():
                    if line.startswith(("totals:", "summary:")):
                        return int(line.split()[1])
            time.sleep(0.1)
        raise RuntimeError(f"no callgrind count for backend {pid} in {self.work}")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGINT)  # fast shutdown
            try:
                self.proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.proc = None


def _session(server: Server, db: str, rounds: int, batch: int, phases: int) -> int:
    """Runs `rounds` rounds of the first `phases` calls of the lifecycle in one session;
    returns the session's instruction count."""
    specs = json.dumps([{"kind": "bench", "payload": {}, "notify": False}] * batch)
    # What the example app's no-op handler returns, as the judged run's workers complete.
    results = [Jsonb({"ok": True})] * batch
    with psycopg.connect(server.url(db), autocommit=True) as conn:
        pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
        for _ in range(rounds):
            ids = [r[0] for r in conn.execute(SUBMIT, (specs,))]
            if phases < 2:
                continue
            leases = conn.execute(CLAIM, (ids, "bench-1")).fetchall()
            if len(leases) != batch:
                raise RuntimeError(f"claimed {len(leases)} of {batch}")
            if phases < 3:
                continue
            unusual = conn.execute(COMPLETE, {
                "job_ids": [l[0] for l in leases], "worker": "bench-1",
                "lease_versions": [l[1] for l in leases], "results": results,
                "tokens": [l[2] for l in leases]}).fetchall()
            if unusual:
                raise RuntimeError(f"{len(unusual)} completions were not accepted as done")
    return server.count(pid)


def measure(server: Server, db: str, batch: int, rounds: int) -> dict[str, float]:
    """Instructions per job of each call at this batch size."""
    cumulative = []
    warm = max(1, WARM_JOBS // batch)
    for phases in (1, 2, 3):
        short = _session(server, db, warm, batch, phases)
        long = _session(server, db, warm + rounds, batch, phases)
        cumulative.append((long - short) / rounds / batch)
    per = {"submit": cumulative[0], "claim": cumulative[1] - cumulative[0],
           "complete": cumulative[2] - cumulative[1]}
    per["total"] = cumulative[2]
    return per


def _deploy(server: Server, db: str) -> None:
    with psycopg.connect(server.url("postgres"), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{db}"')
    target = f"db:pg://root@127.0.0.1:{server.port}/{db}"
    out = subprocess.run(["sqitch", "--quiet", "deploy", target], cwd=ROOT, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"sqitch deploy failed: {out.stderr.strip()[-800:]}")
    with psycopg.connect(server.url(db), autocommit=True) as conn:
        conn.execute("SELECT jobs.define_type('bench')")


def _variant(server: Server, name: str, sql: Path) -> None:
    with psycopg.connect(server.url("postgres"), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}" TEMPLATE plan')
    out = subprocess.run(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", server.url(name), "-f", str(sql)],
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"variant {sql}: {out.stderr.strip()[-800:]}")


def main() -> int:
    ap = argparse.ArgumentParser(prog="bench/instructions", description=__doc__.split("\n\n")[0])
    ap.add_argument("--batch", type=int, action="append", help="batch size (repeatable; default 100 and 1000)")
    ap.add_argument("--jobs", type=int, default=2000,
                    help="jobs measured per session, in rounds of a batch (default 2,000)")
    ap.add_argument("--variant", type=Path, action="append", default=[],
                    help="a SQL file applied to a copy of the deployed schema, measured beside it (repeatable)")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = ap.parse_args()
    for v in args.variant:
        if not v.is_file():
            ap.error(f"no such variant file: {v}")
    if shutil.which("valgrind") is None:
        sys.exit("bench/instructions: valgrind is missing (Debian: apt-get install valgrind)")
    batches = args.batch or [100, 1000]
    if any(b < 1 or b > 10_000 for b in batches) or args.jobs < 1:
        ap.error("a batch is 1 to 10,000 jobs and --jobs at least 1")
    work = Path(tempfile.mkdtemp(prefix="jobfence_instructions_"))
    server = Server(work)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    results: dict[str, dict] = {}
    try:
        progress(f"a private PostgreSQL in {work} (port {server.port}): deploying the plan")
        server.init()
        _deploy(server, "plan")
        dbs = {"plan": "plan"}
        for i, v in enumerate(args.variant, 1):
            _variant(server, f"variant{i}", v)
            dbs[str(v)] = f"variant{i}"
        progress("restarting it under callgrind")
        server.counting()
        for batch in batches:
            for label, db in dbs.items():
                progress(f"batch {batch}: {label}")
                results.setdefault(str(batch), {})[label] = measure(server, db, batch,
                                                                    max(1, args.jobs // batch))
    except (RuntimeError, psycopg.Error, subprocess.CalledProcessError) as exc:
        server.stop()
        # The server's log and the counts stay for a look at what went wrong.
        print(f"bench/instructions: {exc}\n(the cluster's files are kept in {work})", file=sys.stderr)
        return 1
    except BaseException:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)
        raise
    server.stop()
    shutil.rmtree(work, ignore_errors=True)
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    print(f"{'batch':>6}  {'schema':<40} {'submit':>9} {'claim':>9} {'complete':>9} {'total':>9}  vs plan")
    for batch, rows in results.items():
        base = rows["plan"]["total"]
        for label, per in rows.items():
            print(f"{batch:>6}  {label[-40:]:<40} " + " ".join(f"{per[p]:>9,.0f}" for p in (*PHASES, "total"))
                  + f"  {per['total'] / base:.3f}")
    print("instructions per job in the server (callgrind); each call its own transaction, as a worker's are")
    return 0


if __name__ == "__main__":
    sys.exit(main())
