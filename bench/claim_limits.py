"""What priorities, paused queues and global limits cost the claim path, measured in one run
(the machine is shared: read the ratios). Prints the median microseconds per call of
``jobs.claim_many`` of 100 ids and of ``jobs.claim_next(max_jobs => 10)``:

- base:      nothing paused, no kind limited (the plain grant);
- paused:    one other queue paused (the grant's one extra read and filter);
- other:     an unlimited kind while another kind is limited (one primary-key read more);
- limited:   a kind with max_running (row lock, slot pruning and recording);
- rated:     a kind with rate_limit / rate_period (row lock, token bucket);
- head:      with --baseline, the same calls on the plan of the last commit (git archive
             HEAD), the code before these features, as the "no regression" reference.

Each case claims freshly submitted jobs, then completes them untimed, so a limited kind's
slots stay those of one batch, as under a real limit. Usage:
    .venv/bin/python bench/claim_limits.py [--rounds 300] [--baseline]
Needs PostgreSQL on 127.0.0.1 (JOBFENCE_BENCH_SERVER, a superuser) and sqitch on PATH."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import tarfile
import io
import tempfile
import time
from pathlib import Path

import psycopg

REPO = Path(__file__).resolve().parent.parent
SERVER = os.environ.get("JOBFENCE_BENCH_SERVER", "postgresql://root@127.0.0.1:5432")
BATCH = 100


def scratch(name: str, top: Path) -> str:
    with psycopg.connect(f"{SERVER}/postgres", autocommit=True) as c:
        c.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        c.execute(f"CREATE DATABASE {name}")
    subprocess.run(["sqitch", "--quiet", "deploy", f"db:pg://{SERVER.split('://', 1)[1]}/{name}"],
                   cwd=top, check=True, stdout=subprocess.DEVNULL)
    return f"{SERVER}/{name}"


def drop(name: str) -> None:
    with psycopg.connect(f"{SERVER}/postgres", autocommit=True) as c:
        c.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def head_tree(into: Path) -> Path:
    """The last commit's plan and SQL (read-only: git archive)."""
    data = subprocess.run(["git", "-C", str(REPO), "archive", "HEAD", "sqitch.plan", "sqitch.conf", "db"],
                          check=True, capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(into)
    return into


class Case:
    def __init__(self, conn, kind: str, queue: str):
        self.conn, self.kind, self.queue = conn, kind, queue
        self.specs = json.dumps([{"kind": kind, "notify": False}] * BATCH)
        self.many: list[float] = []
        self.next: list[float] = []

    def round(self) -> None:
        c = self.conn
        ids = [r[0] for r in c.execute("SELECT id FROM jobs.submit_many(%s::jsonb)", (self.specs,))]
        started = time.perf_counter()
        leases = c.execute("SELECT job_id, lease_version FROM jobs.claim_many(%s::bigint[], 'bench')",
                           (ids,)).fetchall()
        self.many.append(time.perf_counter() - started)
        self._finish(leases)
        c.execute("SELECT count(*) FROM jobs.submit_many(%s::jsonb)",
                  (json.dumps([{"kind": self.kind, "notify": False}] * 10),))
        started = time.perf_counter()
        leases = c.execute("SELECT job_id, lease_version FROM jobs.claim_next('bench', %s, 10)",
                           ([self.queue],)).fetchall()
        self.next.append(time.perf_counter() - started)
        self._finish(leases)

    def _finish(self, leases) -> None:
        if leases:
            self.conn.execute(
                "SELECT count(*) FROM jobs.complete_many(%s::bigint[], 'bench', %s::bigint[], %s::jsonb[])",
                ([l[0] for l in leases], [l[1] for l in leases], ['{}'] * len(leases)))


def us(xs: list[float]) -> float:
    return statistics.median(xs) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--baseline", action="store_true")
    args = parser.parse_args()
    name = f"claim_limits_{os.getpid()}"
    dbs = [name]
    try:
        url = scratch(name, REPO)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("SELECT jobs.define_type('b.free', queue => 'b.q1')")
            conn.execute("SELECT jobs.define_type('b.lim', queue => 'b.q2', max_running => 1000)")
            conn.execute("SELECT jobs.define_type('b.rate', queue => 'b.q3', rate_limit => 1000000, "
                         "rate_period => '1 second')")
            conn.execute("SELECT jobs.define_type('b.other', queue => 'b.q4')")
            cases = {k: Case(conn, kind, q) for k, kind, q in (
                ("base", "b.other", "b.q4"), ("paused", "b.other", "b.q4"),
                ("other", "b.free", "b.q1"), ("limited", "b.lim", "b.q2"), ("rated", "b.rate", "b.q3"))}
            head = None
            if args.baseline:
                tmp = Path(tempfile.mkdtemp())
                dbs.append(name + "_head")
                head_conn = psycopg.connect(scratch(name + "_head", head_tree(tmp)), autocommit=True)
                head_conn.execute("SELECT jobs.define_type('b.other', queue => 'b.q4')")
                head = Case(head_conn, "b.other", "b.q4")
            for kind in ("b.other", "b.free", "b.lim", "b.rate"):  # warm the plan caches
                for _ in range(10):
                    Case(conn, kind, conn.execute("SELECT queue FROM jobs.job_type WHERE kind = %s",
                                                  (kind,)).fetchone()[0]).round()
            for _ in range(args.rounds):
                # The state each case needs, set between timed calls; interleaved so that
                # drift in the machine's load hits every case alike.
                conn.execute("SELECT jobs.define_type('b.lim', queue => 'b.q2')")
                conn.execute("SELECT jobs.define_type('b.rate', queue => 'b.q3')")
                cases["base"].round()
                conn.execute("SELECT jobs.pause('b.elsewhere')")
                cases["paused"].round()
                conn.execute("SELECT jobs.resume('b.elsewhere')")
                conn.execute("SELECT jobs.define_type('b.lim', queue => 'b.q2', max_running => 1000)")
                conn.execute("SELECT jobs.define_type('b.rate', queue => 'b.q3', rate_limit => 1000000, "
                             "rate_period => '1 second')")
                cases["other"].round()
                cases["limited"].round()
                cases["rated"].round()
                if head:
                    head.round()
            base = cases["base"]
            print(f"{'case':<8} {'claim_many(100) us':>20} {'ratio':>7} {'claim_next(10) us':>19} {'ratio':>7}")
            rows = list(cases.items()) + ([("head", head)] if head else [])
            for label, case in rows:
                print(f"{label:<8} {us(case.many):>20.0f} {us(case.many) / us(base.many):>7.2f} "
                      f"{us(case.next):>19.0f} {us(case.next) / us(base.next):>7.2f}")
            if head:
                head.conn.close()
    finally:
        for db in dbs:
            drop(db)


if __name__ == "__main__":
    main()
