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
import shutil
import sys
import tempfile
import time
from pathlib import Path

import psycopg
from psycopg.types.json import Jsonb

from jobfence import arrays, sql

from .cluster import Cluster, measured
from .common import progress

# Enough to plan every statement; the short session runs only these.
WARM_JOBS = 300
SUBMIT = "SELECT id FROM jobs.submit_many(%s::jsonb)"
CLAIM = "SELECT job_id, lease_version, token FROM jobs.claim_many_with_token(%b::bigint[], %s)"
# The worker's own completion: the usual outcomes are not sent back.
COMPLETE = sql.COMPLETE_MANY_WITH_TOKEN_UNUSUAL
PHASES = ("submit", "claim", "complete")


class Server(Cluster):
    """A private cluster whose every process runs under callgrind once `counting` is called;
    each backend writes its count to cg.<pid> when its session ends."""

    def counting(self) -> None:
        """Restarts the cluster with every process under callgrind. Deploying the plan runs
        hundreds of sessions, which callgrind would slow fifty-fold for nothing: the cluster
        starts without it."""
        self.stop()
        self.start(["valgrind", "--tool=callgrind", f"--callgrind-out-file={self.work}/cg.%p"])

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


def lifecycle(conn: psycopg.Connection, batch: int, rounds: int, phases: int = 3) -> None:
    """`rounds` rounds of the first `phases` calls of the SQL path on `conn` (autocommit: each
    call its own transaction, as a worker's are): submit_many of `batch` specs, the claim of
    their ids, the worker's completion with the example app's no-op result."""
    specs = json.dumps([{"kind": "bench", "payload": {}, "notify": False}] * batch)
    # What the example app's no-op handler returns, as the judged run's workers complete.
    results = arrays.JsonbArray([Jsonb({"ok": True})] * batch)
    # The arrays as a worker sends them (jobfence.arrays): the server reads the same form.
    arrays.register(conn)
    for _ in range(rounds):
        ids = [r[0] for r in conn.execute(SUBMIT, (specs,))]
        if phases < 2:
            continue
        leases = conn.execute(CLAIM, (arrays.BigintArray(ids), "bench-1")).fetchall()
        if len(leases) != batch:
            raise RuntimeError(f"claimed {len(leases)} of {batch}")
        if phases < 3:
            continue
        unusual = conn.execute(COMPLETE, {
            "job_ids": arrays.BigintArray([l[0] for l in leases]), "worker": "bench-1",
            "lease_versions": arrays.BigintArray([l[1] for l in leases]), "results": results,
            "tokens": arrays.UuidArray([l[2] for l in leases])}).fetchall()
        if unusual:
            raise RuntimeError(f"{len(unusual)} completions were not accepted as done")


def _session(server: Server, db: str, rounds: int, batch: int, phases: int) -> int:
    """Runs `rounds` rounds of the first `phases` calls of the lifecycle in one session;
    returns the session's instruction count."""
    with psycopg.connect(server.url(db), autocommit=True) as conn:
        pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
        lifecycle(conn, batch, rounds, phases)
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
    server = Server(Path(tempfile.mkdtemp(prefix="jobfence_instructions_")))

    def count(dbs: dict[str, str]) -> dict[str, dict]:
        progress("restarting it under callgrind")
        server.counting()
        results: dict[str, dict] = {}
        for batch in batches:
            for label, db in dbs.items():
                progress(f"batch {batch}: {label}")
                results.setdefault(str(batch), {})[label] = measure(server, db, batch,
                                                                    max(1, args.jobs // batch))
        return results

    results = measured("bench/instructions", server, args.variant, count)
    if results is None:
        return 1
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
