"""procrastinate (psycopg 3) on the same no-op workload as jobfence's judged configuration.

Its schema in a scratch database (`SchemaManager.apply_schema`); `--processes` worker
processes, each `run_worker(concurrency=--concurrency)` with LISTEN/NOTIFY on (its default)
and an async no-op task, so the sub-workers share one event loop rather than a thread each; a
producer calling `batch_defer` with `--per-call` jobs while they consume. Finished jobs are
kept (`delete_jobs="never"`, its default). Figures from procrastinate's own
`procrastinate_events`: each job's `deferred` event to its `succeeded` event.

    bench/.venv-peers/bin/python bench/peers/procrastinate_run.py --dsn postgresql://…/scratch --jobs 20000
"""

from __future__ import annotations

import asyncio
import sys
import time

from _peer import (Consumers, arguments, figures, mark_ready, need, produce_and_report, progress,
                   wait_for_async, wait_ready)

SYSTEM = "procrastinate"
QUEUE = "bench"
WARM_UP = 1000


def make_app(dsn: str, pool: int):
    procrastinate = need("procrastinate")
    app = procrastinate.App(connector=procrastinate.PsycopgConnector(
        conninfo=dsn, min_size=pool, max_size=pool))

    @app.task(name="noop", queue=QUEUE)
    async def noop() -> None:
        pass

    @app.task(name="probe", queue=QUEUE)
    async def probe() -> None:
        pass
    return app


async def consume(args) -> None:
    # One connection per sub-worker that can be fetching or finishing at once, plus the
    # LISTEN connection and the heartbeat: fewer and the sub-workers queue on the pool.
    app = make_app(args.dsn, args.concurrency + 2)
    async with app.open_async():
        mark_ready(args.work)
        await app.run_worker_async(queues=[QUEUE], concurrency=args.concurrency,
                                   install_signal_handlers=True)


async def succeeded(app, task: str) -> int:
    async with app.connector.pool.connection() as conn:
        cur = await conn.execute("SELECT count(*) FROM procrastinate_jobs WHERE task_name = %s "
                                 "AND status = 'succeeded'", (task,))
        return (await cur.fetchone())[0]


async def warm_up(app, consumers: Consumers, start_workers, analyze: bool) -> None:
    """Warm workers (pool connections, prepared statements) before the timed jobs, with
    WARM_UP jobs of another task that the figures leave out. With `analyze`, the tables get
    statistics while those jobs are queued, before the workers start: the state autovacuum
    gives a production queue under a backlog (this machine's server runs without it). Without
    them, or with statistics of a table whose jobs are all finished, fetch_job's plan reads
    and sorts every queued row for each job it hands out (60,000 queued jobs drained at 200
    jobs/s falling to 43, or averaging 125); taken under a backlog, it reads the first entry
    of the priority index."""
    await app.tasks["probe"].batch_defer_async(*({} for _ in range(WARM_UP)))
    if analyze:
        async with app.connector.pool.connection() as conn:
            await conn.execute("ANALYZE procrastinate_jobs, procrastinate_events")
    start_workers()
    await wait_for_async("the warm-up jobs", lambda: succeeded(app, "probe"), WARM_UP, consumers, 120)


async def run(args) -> dict:
    procrastinate = need("procrastinate")
    app = make_app(args.dsn, 2)
    consumers = Consumers(SYSTEM, args.work)
    async with app.open_async():
        try:
            await app.schema_manager.apply_schema_async()

            def start_workers():
                consumers.start([sys.executable, __file__, "consume", "--dsn", args.dsn, "--work",
                                 str(args.work), "--concurrency", str(args.concurrency)], args.processes)
                wait_ready(consumers, args.processes)
            await warm_up(app, consumers, start_workers, args.analyze)
            progress(SYSTEM, f"workers ready; deferring {args.jobs:,} jobs, {args.per_call} per call")
            noop = app.tasks["noop"]
            cpu0 = consumers.cpu_seconds()
            t0 = time.monotonic()
            for start in range(0, args.jobs, args.per_call):
                await noop.batch_defer_async(*({} for _ in range(min(args.per_call, args.jobs - start))))
            submitted = time.monotonic() - t0
            await wait_for_async(f"{args.jobs:,} jobs", lambda: succeeded(app, "noop"), args.jobs, consumers, args.timeout)
            wall = time.monotonic() - t0
            cpu = consumers.cpu_seconds() - cpu0
            rss = consumers.peak_rss()
            consumers.stop()
            async with app.connector.pool.connection() as conn:
                # Statistics first (the timed part is over), so reading the records is planned.
                await conn.execute("ANALYZE procrastinate_jobs, procrastinate_events")
                cur = await conn.execute(
                    "SELECT extract(epoch FROM min(e.at) FILTER (WHERE e.type = 'deferred'))::float8, "
                    "       extract(epoch FROM max(e.at) FILTER (WHERE e.type = 'succeeded'))::float8 "
                    "FROM procrastinate_events e JOIN procrastinate_jobs j ON j.id = e.job_id "
                    "WHERE j.task_name = 'noop' GROUP BY e.job_id")
                rows = await cur.fetchall()
        finally:
            consumers.stop()
    config = {"processes": args.processes, "concurrency": args.concurrency,
              "pool_per_process": args.concurrency + 2, "batch_defer_per_call": args.per_call,
              "listen_notify": True, "delete_jobs": "never", "task": "async",
              "analyzed_under_warm_up_backlog": args.analyze}
    return figures(SYSTEM, procrastinate.__version__, args, config, [tuple(r) for r in rows], wall,
                   submitted, cpu, rss, "procrastinate_events: deferred -> succeeded")


def main() -> None:
    args = arguments(SYSTEM, processes=2, concurrency=10, per_call=1000, analyze=False)
    if not args.dsn:
        sys.exit(f"{SYSTEM}: --dsn (a scratch database) is required")
    if args.role == "consume":
        asyncio.run(consume(args))
        return
    produce_and_report(SYSTEM, lambda: asyncio.run(run(args)),
                       (need("procrastinate").exceptions.ConnectorException, need("psycopg").Error))


if __name__ == "__main__":
    main()
