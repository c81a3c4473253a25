"""Celery on Redis, as many users would run it instead: no result backend
(`task_ignore_result`), acknowledged when a task starts (`task_acks_late` off, the default).

`--processes` `celery worker` processes with `--pool`/`--concurrency`/`--prefetch`, without
gossip, mingle and heartbeats (broker chatter a benchmark does not need); a producer calling
`apply_async` in a loop over one connection while they consume (Celery has no batch enqueue:
a group publishes its tasks one by one as well). Figures: Celery keeps no record of a
finished task without a result backend, so each worker process writes one line per task from
a `task_postrun` signal handler (the submit time travels as the task's argument, the finish
time is taken in the handler) to a file of its own, flushed every 0.1 s.

    bench/.venv-peers/bin/python bench/peers/celery_run.py --redis-url redis://127.0.0.1:6379/N --jobs 20000
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from _peer import (Consumers, Stamps, arguments, figures, forget_redis, mark_ready, need,
                   produce_and_report, progress, wait_for, wait_ready)

SYSTEM = "celery"
QUEUE = "jobfence_bench_peers"
WARM_UP = 1000

celery = need("celery")
app = celery.Celery("celery_run", broker=os.environ.get("PEER_REDIS_URL"))
app.conf.update(
    task_ignore_result=True, result_backend=None, task_acks_late=False,
    task_default_queue=QUEUE, broker_connection_retry_on_startup=True,
    # Every key under the run's prefix, so the run can delete its keys and only its own.
    broker_transport_options={"global_keyprefix": os.environ.get("PEER_REDIS_PREFIX", "jfpeers") + ":"},
)


@app.task(name="noop")
def noop(submitted: float) -> None:
    pass


@app.task(name="probe")
def probe(submitted: float) -> None:
    pass


_stamps: dict[int, Stamps] = {}


@celery.signals.task_postrun.connect
def _done(sender=None, args=(), **_) -> None:
    finished = time.time()
    pid = os.getpid()
    if pid not in _stamps:  # a prefork child starts its file (and flusher) on its first task
        _stamps[pid] = Stamps(Path(os.environ["PEER_WORK"]))
    if sender is not None and sender.name == "noop":
        _stamps[pid].add(args[0], finished)
    else:
        with (Path(os.environ["PEER_WORK"]) / f"probe-{pid}").open("a") as f:
            f.write("x")


@celery.signals.worker_ready.connect
def _ready(**_) -> None:
    mark_ready(Path(os.environ["PEER_WORK"]))


def run(args) -> dict:
    redis = need("redis")
    r = redis.Redis.from_url(args.redis_url)
    consumers = Consumers(SYSTEM, args.work)
    try:
        consumers.start([sys.executable, "-m", "celery", "-A", "celery_run", "worker", "--pool", args.pool,
                         "--concurrency", str(args.concurrency), "--prefetch-multiplier", str(args.prefetch),
                         "--without-gossip", "--without-mingle", "--without-heartbeat", "-Q", QUEUE,
                         "--loglevel", "WARNING"], args.processes,
                        env={"PEER_REDIS_URL": args.redis_url, "PEER_WORK": str(args.work),
                             "PEER_REDIS_PREFIX": args.redis_prefix})
        wait_ready(consumers, args.processes)
        with app.producer_or_acquire() as producer:
            for _ in range(WARM_UP):
                probe.apply_async((time.time(),), producer=producer)
            wait_for("the warm-up tasks", lambda: sum(p.stat().st_size for p in args.work.glob("probe-*")),
                     WARM_UP, consumers, 120)
            progress(SYSTEM, f"workers ready; publishing {args.jobs:,} tasks")
            cpu0 = consumers.cpu_seconds()
            t0 = time.monotonic()
            for _ in range(args.jobs):
                noop.apply_async((time.time(),), producer=producer)
            submitted = time.monotonic() - t0
        seen: dict = {}
        try:
            wait_for(f"{args.jobs:,} tasks", lambda: Stamps.count(args.work, seen), args.jobs, consumers,
                     args.timeout)
        except RuntimeError as exc:  # say where the missing ones are: still queued, or reserved
            raise RuntimeError(f"{exc}; in Redis: {r.llen(args.redis_prefix + ':' + QUEUE)} queued, "
                               f"{r.hlen(args.redis_prefix + ':unacked')} delivered and not acked") from None
        wall = time.monotonic() - t0
        cpu = consumers.cpu_seconds() - cpu0
        rss = consumers.peak_rss()
        consumers.stop()
        config = {"processes": args.processes, "pool": args.pool, "concurrency": args.concurrency,
                  "prefetch_multiplier": args.prefetch, "acks_late": False, "result_backend": None,
                  "broker": "redis"}
        return figures(SYSTEM, celery.__version__, args, config, Stamps.pairs(args.work), wall, submitted,
                       cpu, rss, "task_postrun signal handler in each worker process (finish); "
                       "time.time() at apply_async carried as the argument (submit)")
    finally:
        consumers.stop()
        forget_redis(r, args.redis_prefix)


def main() -> None:
    args = arguments(SYSTEM, processes=2, concurrency=1, pool="solo", prefetch=64)
    if not args.redis_url:
        sys.exit(f"{SYSTEM}: --redis-url (a Redis database of its own) is required")
    app.conf.broker_url = args.redis_url
    app.conf.broker_transport_options = {"global_keyprefix": args.redis_prefix + ":"}
    produce_and_report(SYSTEM, lambda: run(args), (need("redis").exceptions.ConnectionError,))


if __name__ == "__main__":
    main()
