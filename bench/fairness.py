"""Fair claiming across concurrency keys (docs/sql-api.md, "Per-key concurrency and fair
claiming"), measured in one run (the machine is shared: read the ratios and batch counts).

A noisy key has --noisy queued jobs (100,000 by default), submitted first; a quiet key then
submits --quiet (10). Workers claim with ``jobs.claim_next(max_jobs => --batch)`` and complete
each batch, one round trip each, until the quiet key's jobs have all been claimed. Printed:

- keyed:    the batch in which the quiet key's last job was claimed, and how many of the
            noisy key's jobs ran before it (fair claiming: within the first batches);
- fifo:     the same backlog without keys, the quiet jobs last in line (the plain order: the
            quiet jobs wait for the whole noisy backlog);
- cost:     the median microseconds of one claim_next of --batch over a deep backlog: without
            keys, with the 2 keys, and with --keys keys (many tenants), and the ratios to the
            unkeyed call. The keyed call reads each key of the queue once (an index step),
            so it grows with the number of keys that have queued jobs.
- bound:    the keyed case again with max_running_per_key => --bound on the kind (each
            batch is completed before the next claim, so the bound is what limits a key's
            share, and the quiet key still gets its turns).

Usage: .venv/bin/python bench/fairness.py [--noisy 100000] [--quiet 10] [--batch 100]
       [--keys 1000] [--bound 20] [--json]
Needs PostgreSQL on 127.0.0.1 (JOBFENCE_BENCH_SERVER, a superuser) and sqitch on PATH."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import psycopg

REPO = Path(__file__).resolve().parent.parent
SERVER = os.environ.get("JOBFENCE_BENCH_SERVER", "postgresql://root@127.0.0.1:5432")


def progress(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def scratch(name: str) -> str:
    with psycopg.connect(f"{SERVER}/postgres", autocommit=True) as c:
        c.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        c.execute(f"CREATE DATABASE {name}")
    subprocess.run(["sqitch", "--quiet", "deploy", f"db:pg://{SERVER.split('://', 1)[1]}/{name}"],
                   cwd=REPO, check=True, stdout=subprocess.DEVNULL)
    return f"{SERVER}/{name}"


def drop(name: str) -> None:
    with psycopg.connect(f"{SERVER}/postgres", autocommit=True) as c:
        c.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def submit(conn, kind: str, n: int, key: str | None) -> None:
    spec = {"kind": kind, "notify": False}
    if key is not None:
        spec["concurrency_key"] = key
    for start in range(0, n, 1000):
        conn.execute("SELECT count(*) FROM jobs.submit_many(%s::jsonb)",
                     (json.dumps([spec] * min(1000, n - start)),))


def reset(conn) -> None:
    conn.execute("TRUNCATE jobs.job, jobs.event, jobs.kind_slot, jobs.job_dependency")
    conn.execute("VACUUM ANALYZE jobs.job")


def claim_batch(conn, queue: str, batch: int) -> tuple[list[tuple[int, str | None]], float]:
    """One claim_next (timed) and the completion of what it granted (untimed)."""
    started = time.perf_counter()
    leases = conn.execute("SELECT l.job_id, l.lease_version FROM jobs.claim_next('bench', %s, %s) AS l",
                          ([queue], batch)).fetchall()
    took = time.perf_counter() - started
    if not leases:
        return [], took
    ids = [lease[0] for lease in leases]
    keys = conn.execute("SELECT id, concurrency_key FROM jobs.job WHERE id = ANY (%s)", (ids,)).fetchall()
    conn.execute("SELECT count(*) FROM jobs.complete_many(%s::bigint[], 'bench', %s::bigint[], %s::jsonb[])",
                 (ids, [lease[1] for lease in leases], ['{}'] * len(leases)))
    return keys, took


def until_quiet(conn, queue: str, batch: int, quiet: int, quiet_key: str | None,
                quiet_ids: set[int]) -> dict:
    """Claim batches until every quiet job was claimed: in which batch, after how many others."""
    batches = others = seen = 0
    times = []
    while seen < quiet:
        got, took = claim_batch(conn, queue, batch)
        batches += 1
        times.append(took)
        if not got:
            raise SystemExit(f"claim_next granted nothing after {batches} batches")
        for job_id, key in got:
            if (quiet_key is not None and key == quiet_key) or job_id in quiet_ids:
                seen += 1
            else:
                others += 1
    return {"batches": batches, "others_before": others, "claim_us": statistics.median(times) * 1e6}


def cost(conn, queue: str, batch: int, rounds: int) -> float:
    """Median microseconds of a claim_next of batch over the queue's current backlog."""
    times = []
    for _ in range(rounds):
        got, took = claim_batch(conn, queue, batch)
        if not got:
            break
        times.append(took)
    return statistics.median(times) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--noisy", type=int, default=100_000)
    parser.add_argument("--quiet", type=int, default=10)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--keys", type=int, default=1000)
    parser.add_argument("--bound", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    name = f"fairness_{os.getpid()}"
    result: dict = {"noisy": args.noisy, "quiet": args.quiet, "batch": args.batch}
    try:
        url = scratch(name)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("SELECT jobs.define_type('fair', queue => 'fair')")
            for _ in range(20):  # the session's plans are cached from here on
                submit(conn, "fair", 10, "warm")
                submit(conn, "fair", 10, None)
                claim_batch(conn, "fair", 10)

            progress(f"keyed: {args.noisy:,} jobs of the noisy key, then {args.quiet} of the quiet key")
            reset(conn)
            submit(conn, "fair", args.noisy, "noisy")
            submit(conn, "fair", args.quiet, "quiet")
            result["keyed"] = until_quiet(conn, "fair", args.batch, args.quiet, "quiet", set())
            result["cost_keyed_2_keys_us"] = cost(conn, "fair", args.batch, args.rounds)

            progress("fifo: the same backlog without keys")
            reset(conn)
            submit(conn, "fair", args.noisy, None)
            first_quiet = conn.execute("SELECT coalesce(max(id), 0) + 1 FROM jobs.job").fetchone()[0]
            submit(conn, "fair", args.quiet, None)
            quiet_ids = set(range(first_quiet, first_quiet + args.quiet))
            result["fifo"] = until_quiet(conn, "fair", args.batch, args.quiet, None, quiet_ids)
            reset(conn)
            submit(conn, "fair", args.noisy, None)
            result["cost_unkeyed_us"] = cost(conn, "fair", args.batch, args.rounds)

            progress(f"cost: {args.noisy:,} jobs over {args.keys:,} keys")
            reset(conn)
            per_key = max(1, args.noisy // args.keys)
            for k in range(args.keys):
                submit(conn, "fair", per_key, f"tenant:{k}")
            result["cost_keyed_many_keys_us"] = cost(conn, "fair", args.batch, args.rounds)
            result["keys"] = args.keys

            progress(f"bound: max_running_per_key => {args.bound}")
            conn.execute("SELECT jobs.define_type('fair', queue => 'fair', max_running_per_key => %s)",
                         (args.bound,))
            reset(conn)
            submit(conn, "fair", args.noisy, "noisy")
            submit(conn, "fair", args.quiet, "quiet")
            result["bound"] = until_quiet(conn, "fair", args.batch, args.quiet, "quiet", set())
            result["bound"]["max_running_per_key"] = args.bound
    finally:
        drop(name)

    base = result["cost_unkeyed_us"]
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"fair claiming: {args.noisy:,} queued jobs of a noisy key, then {args.quiet} of a quiet "
          f"key; claim_next of {args.batch}, each batch completed")
    print(f"{'case':<34} {'quiet done in batch':>20} {'others before':>14}")
    for label, key in (("keyed (the keys take turns)", "keyed"),
                       (f"keyed, max_running_per_key {args.bound}", "bound"),
                       ("fifo (no keys: the plain order)", "fifo")):
        r = result[key]
        print(f"{label:<34} {r['batches']:>20,} {r['others_before']:>14,}")
    print(f"{'claim_next cost':<34} {'us per call':>20} {'x unkeyed':>14}")
    for label, key in (("unkeyed backlog", "cost_unkeyed_us"), ("2 keys", "cost_keyed_2_keys_us"),
                       (f"{args.keys:,} keys", "cost_keyed_many_keys_us")):
        print(f"{label:<34} {result[key]:>20,.0f} {result[key] / base:>14.2f}")


if __name__ == "__main__":
    main()
