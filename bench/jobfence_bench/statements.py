"""bench/statements: where the SQL path's server time goes, statement by statement, in time
rather than instructions. A private PostgreSQL with pg_stat_statements tracking nested
statements (the shared server has no shared_preload_libraries, and loading it needs a
restart) runs submit_many -> claim_many_with_token -> complete_many on one connection, and
prints each statement's execution time per job, the statements the functions run inside them
included, and each jobs.* function's self and total time (track_functions).

Instructions (bench/instructions) do not drift with the machine but weigh every instruction
alike: a statement's set-up and a commit's flush run far fewer instructions per microsecond
than a tight loop over rows, so a part's share of the instructions is not its share of the
time. This is the other view: wall time on an otherwise idle cluster, one connection, so
the figures rank the parts of one run; a nested statement's time includes what it calls, so
they do not add up. With --variant, the same for a copy of the schema with a SQL file applied,
the databases taking turns round by round so the machine's drift falls on both."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import psycopg

from .cluster import Cluster, measured
from .common import progress, reset
from .instructions import lifecycle

SETTINGS = ("shared_preload_libraries = 'pg_stat_statements'\n"
            "pg_stat_statements.track = all\npg_stat_statements.max = 5000\n"
            "track_functions = 'pl'\n")
WARM_ROUNDS = 5
SLICES = 5


def _reset(server: Cluster, db: str) -> None:
    """Empty tables (as every timed run of the bench starts) and statistics from zero."""
    with psycopg.connect(server.url(db), autocommit=True) as conn:
        reset(conn)
        conn.execute("SELECT pg_stat_statements_reset(0, (SELECT oid FROM pg_database WHERE datname = current_database()), 0)")
        conn.execute("SELECT pg_stat_reset()")


def _read(server: Cluster, db: str, rounds: int, batch: int, top: int) -> dict:
    """The statistics of `db` since its reset, per job. A session hands its function counts
    over as it exits, after its client has gone: wait until every completion is counted."""
    jobs = rounds * batch
    with psycopg.connect(server.url(db), autocommit=True) as conn:
        deadline = time.monotonic() + 30
        while (conn.execute("SELECT coalesce(sum(calls), 0) FROM pg_stat_user_functions "
                            "WHERE schemaname = 'jobs' AND funcname = 'complete_many'").fetchone()[0] < rounds):
            if time.monotonic() > deadline:
                raise RuntimeError("the function statistics did not arrive within 30 s")
            time.sleep(0.05)
            conn.execute("SELECT pg_stat_clear_snapshot()")
        statements = conn.execute("""
            SELECT s.total_exec_time * 1000 / %(jobs)s, s.calls, s.toplevel,
                   regexp_replace(s.query, '\\s+', ' ', 'g')
              FROM pg_stat_statements AS s
             WHERE s.dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
               AND s.query ~ 'jobs\\.|:=|\\m(SELECT|INSERT|UPDATE|WITH)\\M' AND s.query !~ 'pg_stat_'
             ORDER BY s.total_exec_time DESC LIMIT %(top)s""", {"jobs": jobs, "top": top}).fetchall()
        total = conn.execute("""
            SELECT coalesce(sum(s.total_exec_time), 0) * 1000 / %(jobs)s FROM pg_stat_statements AS s
             WHERE s.dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
               AND s.toplevel AND s.query ~ 'jobs\\.'""", {"jobs": jobs}).fetchone()[0]
        functions = conn.execute("""
            SELECT f.funcname, f.calls, f.self_time * 1000 / %(jobs)s, f.total_time * 1000 / %(jobs)s
              FROM pg_stat_user_functions AS f WHERE f.schemaname = 'jobs' AND f.calls > 0
             ORDER BY f.total_time DESC""", {"jobs": jobs}).fetchall()
    return {"calls_us_per_job": total,
            "statements": [{"us_per_job": t, "calls": c, "toplevel": top_, "query": q}
                           for t, c, top_, q in statements],
            "functions": [{"function": f, "calls": c, "self_us_per_job": s, "total_us_per_job": t}
                          for f, c, s, t in functions]}


def measure(server: Cluster, dbs: list[str], batch: int, rounds: int, top: int) -> dict[str, dict]:
    """Per database, the statistics of `rounds` rounds at `batch`, taken in SLICES turns. One
    session per database for the whole measure, warmed before the statistics are reset: a
    new session would plan every statement of the functions again inside the figures."""
    sessions: dict[str, psycopg.Connection] = {}
    try:
        for db in dbs:
            with psycopg.connect(server.url(db), autocommit=True) as conn:
                conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
            sessions[db] = psycopg.connect(server.url(db), autocommit=True)
            lifecycle(sessions[db], batch, WARM_ROUNDS)
            # The warm-up's function counts, handed over now rather than inside the figures.
            sessions[db].execute("SELECT pg_stat_force_next_flush()")
            sessions[db].execute("SELECT 1")
            _reset(server, db)
        per_slice = max(1, rounds // SLICES)
        for turn in range(SLICES):
            for db in dbs:
                progress(f"batch {batch}: {db}, turn {turn + 1}/{SLICES}")
                lifecycle(sessions[db], batch, per_slice)
    finally:
        for conn in sessions.values():
            conn.close()
    return {db: _read(server, db, per_slice * SLICES, batch, top) for db in dbs}


def _print(results: dict[str, dict], width: int) -> None:
    for db, figures in results.items():
        print(f"== {db}: the three calls, {figures['calls_us_per_job']:.2f} µs of execution per job")
        print(f"== {db}: statements, µs of execution per job (nested ones included in their callers)")
        for s in figures["statements"]:
            query = s["query"] if len(s["query"]) <= width else s["query"][:width - 1] + "…"
            print(f"{s['us_per_job']:9.2f} {s['calls']:7d} {'top' if s['toplevel'] else '   '} {query}")
        print(f"== {db}: jobs.* functions, µs per job (self, total) and calls")
        for f in figures["functions"]:
            print(f"{f['self_us_per_job']:9.2f} {f['total_us_per_job']:9.2f} {f['calls']:7d} {f['function']}")


def main() -> int:
    ap = argparse.ArgumentParser(prog="bench/statements", description=__doc__.split("\n\n")[0])
    ap.add_argument("--batch", type=int, default=100, help="jobs per call (default 100)")
    ap.add_argument("--jobs", type=int, default=30_000, help="jobs measured per database (default 30,000)")
    ap.add_argument("--variant", type=Path, action="append", default=[],
                    help="a SQL file applied to a copy of the deployed schema, measured beside it (repeatable)")
    ap.add_argument("--top", type=int, default=40, help="statements shown per database (default 40)")
    ap.add_argument("--width", type=int, default=120, help="characters of each statement shown (default 120)")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = ap.parse_args()
    for v in args.variant:
        if not v.is_file():
            ap.error(f"no such variant file: {v}")
    if not 1 <= args.batch <= 10_000 or args.jobs < args.batch or args.top < 1 or args.width < 20:
        ap.error("a batch is 1 to 10,000 jobs, --jobs at least one batch, --top at least 1, --width at least 20")
    server = Cluster(Path(tempfile.mkdtemp(prefix="jobfence_statements_")), SETTINGS)

    def profile(dbs: dict[str, str]) -> dict[str, dict]:
        figures = measure(server, list(dbs.values()), args.batch, max(1, args.jobs // args.batch), args.top)
        return {label: figures[db] for label, db in dbs.items()}

    results = measured("bench/statements", server, args.variant, profile)
    if results is None:
        return 1
    if args.json:
        print(json.dumps({"batch": args.batch, "jobs": args.jobs, "databases": results}, indent=2))
        return 0
    _print(results, args.width)
    return 0


if __name__ == "__main__":
    sys.exit(main())
