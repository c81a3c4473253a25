"""Issue 7's judged figure, exactly: 60,000 no-op jobs submitted with `jobs.submit_many` (1,000
per call, `notify` on, so `jobfence relay` pushes them) and drained by 2 × `jobfence worker
--app jobfence.examples:app --batch 100` with no other flag. Jobs/s is submitted jobs over the
time from the first submit to the last job done, read from the jobs' rows (the first one's
created_at, the last one's finished_at), as the peers' figures are read from theirs. Each run
alternates with the pgbench batch-100 ceilings (ceilings.py: the bare statements, and the same
writes as the package's), so every ratio pairs neighbouring measurements. CPU seconds per job
are read from /proc for the workers, the relay and PostgreSQL's processes, to show where the
machine's two cores go."""

from __future__ import annotations

import os
import time

from psycopg.types.json import Jsonb

from . import ceilings, profile
from .common import (Settings, connect, cpu_ticks, figure, peak_rss_mb, postgres_ticks, progress, reset,
                     scalar, stop)
from .e2e import start_relay, start_workers, wait_ready

JOBS = 60_000
# Jobs still to end: one probe of each status's partial index, never a count of the table.
UNFINISHED = ("SELECT EXISTS (SELECT 1 FROM jobs.job WHERE status = 'queued') "
              "OR EXISTS (SELECT 1 FROM jobs.job WHERE status = 'processing') "
              "OR EXISTS (SELECT 1 FROM jobs.job WHERE status = 'enqueue_failed')")
# First submit to last job done, from the rows (the submits' and completions' now()): the run's
# jobs are those after the probe job.
RUN_SPAN = ("SELECT count(*) FILTER (WHERE status IN ('done', 'failed')), "
            "extract(epoch FROM max(finished_at) - min(created_at))::float8 FROM jobs.job WHERE id > %s")
PER_CALL = 1_000
TIMEOUT_S = 120


def _cpu(workers: list, relay) -> dict[str, float]:
    hz = os.sysconf("SC_CLK_TCK")
    return {"workers": sum(cpu_ticks(p.pid) for p in workers) / hz, "relay": cpu_ticks(relay.pid) / hz,
            "postgres": sum(postgres_ticks().values()) / hz}


def one_run(settings: Settings, admin, jobs: int, spy: float = 0.0,
            rss: dict | None = None) -> tuple[float, dict, dict]:
    """One timed run; with `spy` seconds, py-spy the workers and the relay meanwhile; with
    `rss`, fill it with the peak resident set (MB) of each worker and of the relay."""
    from jobfence import Client

    reset(admin)
    relay_log = settings.work / "relay.log"
    seen = relay_log.stat().st_size if relay_log.exists() else 0  # the log grows across runs
    relay = start_relay(settings)
    workers = start_workers(settings, 2, 100, "judged")
    try:
        with Client(settings.url, settings.redis_url) as client:
            wait_ready(settings, admin, client, "noop", workers + [relay])
        # Notifications sent before the relay listens reach nobody, and this configuration
        # has no reaper to re-push them: start submitting only once it listens.
        deadline = time.monotonic() + 60
        while "relay_listening" not in relay_log.read_bytes()[seen:].decode(errors="replace"):
            if time.monotonic() > deadline or relay.poll() is not None:
                raise RuntimeError("the relay did not start listening within 60 s")
            time.sleep(0.05)
        base = scalar(admin, "SELECT coalesce(max(id), 0) FROM jobs.job")
        specs = Jsonb([{"kind": "noop", "payload": {}}] * PER_CALL)
        with connect(settings.url) as producer:
            before = _cpu(workers, relay)
            t0 = time.perf_counter()
            spying = profile.start({f"worker{i}-judged": p.pid for i, p in enumerate(workers)}
                                   | {"relay-judged": relay.pid}, spy) if spy else {}
            for _ in range(jobs // PER_CALL):
                producer.execute("SELECT count(*) FROM jobs.submit_many(%s)", (specs,))
            # Watching the drain must not take the cores it measures: a count of the ended
            # jobs read a growing table 50 times a second (4 ms of CPU each at 60,000 rows).
            # Each status with work left is one probe of its partial index; the figure itself
            # comes from the jobs' rows below, not from when this loop noticed.
            while scalar(admin, UNFINISHED):
                if time.perf_counter() - t0 > TIMEOUT_S:
                    states = admin.execute("SELECT status::text, count(*) FROM jobs.job GROUP BY 1").fetchall()
                    raise RuntimeError(f"{jobs} jobs not done within {TIMEOUT_S} s: {dict(states)}; "
                                       f"logs in {settings.work}")
                time.sleep(0.02)
            after = _cpu(workers, relay)
            ended, elapsed = admin.execute(RUN_SPAN, (base,)).fetchone()
            if ended != jobs:
                raise RuntimeError(f"{ended} of the run's {jobs} jobs ended; logs in {settings.work}")
            if rss is not None:  # VmHWM goes with the process: read it before they stop
                rss.update({"workers": [peak_rss_mb(p.pid) for p in workers], "relay": peak_rss_mb(relay.pid)})
        spied = profile.finish(spying, spy)
    finally:
        for p in workers + [relay]:
            stop(p)
    return jobs / elapsed, {k: (after[k] - before[k]) / jobs * 1e6 for k in after}, spied


def run(settings: Settings, admin) -> dict:
    jobs = JOBS // 3 if settings.quick else JOBS
    path = settings.work / "ceiling_100.sql"
    path.write_text(ceilings.script(100))
    same_path = settings.work / "ceiling_same_writes_100.sql"
    same_path.write_text(ceilings.same_writes_script(100))
    rates, ceilings_100, ratios, same_100, same_ratios = [], [], [], [], []
    cpu: dict[str, list[float]] = {}
    for rep in range(settings.reps):
        reset(admin)
        ceiling = ceilings.pgbench(settings, path)["tps"] * 100
        reset(admin)
        same = ceilings.pgbench(settings, same_path)["tps"] * 100
        rate, us, _ = one_run(settings, admin, jobs)
        rates.append(rate)
        ceilings_100.append(ceiling)
        ratios.append(rate / ceiling)
        same_100.append(same)
        same_ratios.append(rate / same)
        for k, v in us.items():
            cpu.setdefault(k, []).append(v)
        progress(f"judged run {rep + 1}/{settings.reps}: {rate:,.0f} jobs/s, ceiling {ceiling:,.0f} "
                 f"({rate / ceiling:.3f}x), same writes {same:,.0f} ({rate / same:.3f}x); CPU µs/job "
                 + ", ".join(f"{k} {v:.0f}" for k, v in us.items()))
    spied = None
    if settings.profile:
        # Sampling slows what it samples: an extra run, never one of the timed ones. The
        # full 60,000 jobs so the sampled seconds fall inside the drain.
        progress("judged: one more run with py-spy on the workers and the relay")
        reset(admin)
        _, _, spied = one_run(settings, admin, JOBS, spy=3.0)
    reset(admin)
    return {"jobs": jobs, "profile": spied, "jobs_per_s": figure(rates, "jobs/s"),
            "ceiling_batch_100": figure(ceilings_100, "jobs/s"),
            "ratio_to_ceiling": figure(ratios, "x"),
            "same_writes_batch_100": figure(same_100, "jobs/s"),
            "ratio_to_same_writes": figure(same_ratios, "x"),
            "cpu_us_per_job": {k: figure(v, "µs/job") for k, v in cpu.items()}}
