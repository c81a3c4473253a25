"""RQ on Redis, as many users would run it instead.

`--processes` RQ workers of class `--worker` (`SimpleWorker` by default: it runs each job in
the worker's own process, where RQ's default `Worker` forks a child per job, which for a
no-op costs far more than the job; `rq worker-pool -w rq.worker.SimpleWorker` starts the same
processes); a producer calling `Queue.enqueue_many` with `--per-call` jobs in one Redis
pipeline while they consume. Figures from RQ's own job hashes: `enqueued_at` to `ended_at`
(kept with `result_ttl` of an hour: RQ's default of 500 s deletes them sooner), counted done by
the queue's FinishedJobRegistry.

    bench/.venv-peers/bin/python bench/peers/rq_run.py --redis-url redis://127.0.0.1:6379/N --jobs 20000
"""

from __future__ import annotations

import os
import sys
import time
from datetime import timezone

from _peer import (Consumers, arguments, figures, forget_redis, mark_ready, need,
                   produce_and_report, progress, wait_for, wait_ready)

SYSTEM = "rq"
QUEUE = "jobfence_bench_peers"
RESULT_TTL = 3600
WARM_UP = 1000


def noop() -> None:
    pass


def probe() -> None:
    pass


def consume(args) -> None:
    redis, rq = need("redis"), need("rq")
    conn = redis.Redis.from_url(args.redis_url)
    worker_class = {"simple": rq.SimpleWorker, "fork": rq.Worker}[args.worker]
    worker = worker_class([rq.Queue(QUEUE, connection=conn)], connection=conn)
    mark_ready(args.work)
    worker.work(with_scheduler=False, logging_level="WARNING")


def enqueue(rq, queue, conn, func: str, n: int, per_call: int) -> list[str]:
    ids = []
    for start in range(0, n, per_call):
        with conn.pipeline() as pipe:
            jobs = queue.enqueue_many([rq.Queue.prepare_data(func, result_ttl=RESULT_TTL)
                                       for _ in range(min(per_call, n - start))], pipeline=pipe)
            pipe.execute()
        ids += [job.id for job in jobs]
    return ids


def run(args) -> dict:
    redis, rq = need("redis"), need("rq")
    conn = redis.Redis.from_url(args.redis_url)
    queue = rq.Queue(QUEUE, connection=conn)
    finished_key = queue.finished_job_registry.key
    consumers = Consumers(SYSTEM, args.work)
    try:
        consumers.start([sys.executable, __file__, "consume", "--redis-url", args.redis_url, "--work",
                         str(args.work), "--worker", args.worker, "--redis-prefix", args.redis_prefix],
                        args.processes)
        wait_ready(consumers, args.processes)
        enqueue(rq, queue, conn, "rq_run.probe", WARM_UP, args.per_call)
        wait_for("the warm-up jobs", lambda: conn.zcard(finished_key), WARM_UP, consumers, 120)
        progress(SYSTEM, f"workers ready; enqueuing {args.jobs:,} jobs, {args.per_call} per pipeline")
        cpu0 = consumers.cpu_seconds()
        t0 = time.monotonic()
        ids = enqueue(rq, queue, conn, "rq_run.noop", args.jobs, args.per_call)
        submitted = time.monotonic() - t0
        wait_for(f"{args.jobs:,} jobs", lambda: conn.zcard(finished_key) - WARM_UP, args.jobs, consumers,
                 args.timeout)
        wall = time.monotonic() - t0
        cpu = consumers.cpu_seconds() - cpu0
        rss = consumers.peak_rss()
        consumers.stop()
        pairs = []
        for start in range(0, len(ids), 1000):
            with conn.pipeline() as pipe:
                for job_id in ids[start:start + 1000]:
                    pipe.hmget(rq.job.Job.key_for(job_id), "enqueued_at", "ended_at")
                for enqueued, ended in pipe.execute():
                    if enqueued and ended:
                        pairs.append((_epoch(enqueued), _epoch(ended)))
        config = {"processes": args.processes, "worker_class": args.worker, "enqueue_many_per_pipeline":
                  args.per_call, "result_ttl": RESULT_TTL}
        return figures(SYSTEM, rq.__version__, args, config, pairs, wall, submitted, cpu, rss,
                       "RQ job hashes: enqueued_at -> ended_at")
    finally:
        consumers.stop()
        forget_redis(conn, args.redis_prefix)


def _epoch(stamp: bytes) -> float:
    from datetime import datetime
    # RQ writes UTC as 2025-01-01T00:00:00.123456Z
    return datetime.strptime(stamp.decode(), "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc).timestamp()


def main() -> None:
    args = arguments(SYSTEM, processes=2, per_call=1000, worker="simple")
    if not args.redis_url:
        sys.exit(f"{SYSTEM}: --redis-url (a Redis database of its own) is required")
    # Every key RQ writes starts with RQ_KEY_PREFIX (read when rq is imported), so the run can
    # delete its keys and only its own; the consumers inherit it.
    os.environ["RQ_KEY_PREFIX"] = args.redis_prefix
    if args.role == "consume":
        consume(args)
        return
    produce_and_report(SYSTEM, lambda: run(args), (need("redis").exceptions.ConnectionError,))


if __name__ == "__main__":
    main()
