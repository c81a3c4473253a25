"""PgQueuer (asyncpg) on the same no-op workload as jobfence's judged configuration.

Its tables in a scratch database (`Queries.install()`, the default `durable` tables: logged,
as jobfence's are); `--processes` consumer processes, each running `--concurrency`
QueueManagers with a connection of their own and `batch_size=--batch`, under uvloop as
PgQueuer's own CLI and benchmark run them; a producer enqueuing lists of `--per-call` no-op
jobs while they consume. Figures from PgQueuer's log table: each job's `queued` row to its
`successful` row (both `now()` of the statements that wrote them).

    bench/.venv-peers/bin/python bench/peers/pgqueuer_run.py --dsn postgresql://…/scratch --jobs 20000
"""

from __future__ import annotations

import asyncio
import signal
import sys
import time

from _peer import (Consumers, arguments, figures, mark_ready, need, produce_and_report, progress,
                   wait_for_async, wait_ready)

SYSTEM = "pgqueuer"
WARM_UP = 1000


async def consume(args) -> None:
    asyncpg = need("asyncpg")
    pgqueuer = need("pgqueuer")
    managers = []
    for _ in range(args.concurrency):
        qm = pgqueuer.QueueManager(pgqueuer.Queries(pgqueuer.AsyncpgDriver(await asyncpg.connect(args.dsn))))

        @qm.entrypoint("noop")
        async def noop(job) -> None:
            pass

        @qm.entrypoint("probe")
        async def probe(job) -> None:
            pass
        managers.append(qm)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, lambda: [qm.shutdown.set() for qm in managers])
    mark_ready(args.work)
    await asyncio.gather(*(qm.run(batch_size=args.batch) for qm in managers))


async def count(conn, entrypoint: str) -> int:
    return await conn.fetchval("SELECT count(*) FROM pgqueuer_log WHERE status = 'successful' "
                               "AND entrypoint = $1", entrypoint)


async def run(args) -> dict:
    asyncpg = need("asyncpg")
    pgqueuer = need("pgqueuer")
    conn = await asyncpg.connect(args.dsn)
    consumers = Consumers(SYSTEM, args.work)
    try:
        await pgqueuer.Queries(pgqueuer.AsyncpgDriver(conn)).install()
        queries = pgqueuer.Queries(pgqueuer.AsyncpgDriver(conn))
        consumers.start([sys.executable, __file__, "consume", "--dsn", args.dsn, "--work", str(args.work),
                         "--concurrency", str(args.concurrency), "--batch", str(args.batch)], args.processes)
        wait_ready(consumers, args.processes)
        # Warm consumers (connections, prepared statements) before the timed jobs. With
        # --analyze the tables then get statistics; by default not: of the emptied queue table
        # they plan the dequeue for a handful of rows, which cut its rate twentyfold once
        # thousands were queued.
        await queries.enqueue(["probe"] * WARM_UP, [None] * WARM_UP, [0] * WARM_UP)
        await wait_for_async("the warm-up jobs", lambda: count(conn, "probe"), WARM_UP, consumers, 120)
        if args.analyze:
            await conn.execute("ANALYZE pgqueuer, pgqueuer_log")
        progress(SYSTEM, f"consumers ready; enqueuing {args.jobs:,} jobs, {args.per_call} per call")
        cpu0 = consumers.cpu_seconds()
        t0 = time.monotonic()
        for start in range(0, args.jobs, args.per_call):
            k = min(args.per_call, args.jobs - start)
            await queries.enqueue(["noop"] * k, [None] * k, [0] * k)
        submitted = time.monotonic() - t0
        await wait_for_async(f"{args.jobs:,} jobs", lambda: count(conn, "noop"), args.jobs, consumers, args.timeout)
        wall = time.monotonic() - t0
        cpu = consumers.cpu_seconds() - cpu0
        rss = consumers.peak_rss()
        consumers.stop()
        # Statistics first (the timed part is over): unplanned, reading the records took
        # longer than the run.
        await conn.execute("ANALYZE pgqueuer_log")
        rows = await conn.fetch(
            "SELECT extract(epoch FROM min(created) FILTER (WHERE status = 'queued'))::float8, "
            "       extract(epoch FROM max(created) FILTER (WHERE status = 'successful'))::float8 "
            "FROM pgqueuer_log WHERE entrypoint = 'noop' GROUP BY job_id")
        config = {"processes": args.processes, "queue_managers_per_process": args.concurrency,
                  "batch_size": args.batch, "enqueue_per_call": args.per_call,
                  "driver": "asyncpg", "event_loop": "uvloop", "durability": "durable",
                  "analyzed_after_warm_up": args.analyze}
        return figures(SYSTEM, pgqueuer.__version__, args, config, [tuple(r) for r in rows], wall,
                       submitted, cpu, rss, "pgqueuer_log: queued -> successful")
    finally:
        consumers.stop()
        await conn.close()


def main() -> None:
    args = arguments(SYSTEM, processes=2, concurrency=2, batch=100, per_call=1000, analyze=False)
    if not args.dsn:
        sys.exit(f"{SYSTEM}: --dsn (a scratch database) is required")
    uvloop = need("uvloop")
    if args.role == "consume":
        uvloop.run(consume(args))
        return
    produce_and_report(SYSTEM, lambda: uvloop.run(run(args)), (need("asyncpg").PostgresError,))


if __name__ == "__main__":
    main()
