"""End to end: producers (jobfence.Client.submit_many, 1,000 per call) → Redis → N ×
`jobfence worker --app jobfence.examples:app --batch B` → done, with `jobfence relay` running.

Throughput is read from PostgreSQL: jobs whose finished_at falls inside a timed window while
the producers keep the queue fed. The producers stop feeding while more than BACKLOG jobs are
queued, so the windows measure the workers, not a pile-up, and the latencies are those of a
saturated but not overflowing queue (the idle latency is latency.py's)."""

from __future__ import annotations

import inspect
import os
import threading
import time

from . import latency, profile
from .common import (JOBFENCE, Counters, Settings, connect, figure, peak_rss_mb, progress, reset, scalar,
                     spawn, stop, tail)

BACKLOG = 1000  # one call's worth queued ahead: enough to keep workers fed, little queueing
PRODUCERS = 2
PER_CALL = 1000
JUDGED = (2, 100, "sync")
E2E_WINDOW_S = 3.0  # the full run's window; --quick uses its 1 s runs


def kinds() -> dict[str, str | None]:
    """The example app's no-op kinds: sync `noop`, and an async one if the app has it."""
    try:
        from jobfence.examples import app
    except Exception:  # noqa: BLE001 — the workers will say what is wrong with it
        return {"sync": "noop", "async": None}
    async_kind = None
    for task in app.tasks.values():
        if inspect.iscoroutinefunction(task.handler) and "noop" in task.kind:
            async_kind = task.kind
            break
    return {"sync": "noop" if "noop" in app.tasks else None, "async": async_kind}


def configs(settings: Settings, have_async: bool) -> list[tuple[int, int, str]]:
    if settings.quick:
        out = [JUDGED, (2, 1, "sync")]
        if have_async:
            out.append((2, 100, "async"))
        return out
    handlers = ("sync", "async") if have_async else ("sync",)
    return [(w, b, h) for h in handlers for w in (1, 2, 4) for b in (1, 10, 100)]


def window_seconds(settings: Settings) -> float:
    """One timed window. The full grid is 18 configurations of three windows each, so its
    windows are shorter than the other sections' runs (a batch-1 window still finishes
    about 1,500 jobs)."""
    return min(settings.seconds, E2E_WINDOW_S)


class Producer(threading.Thread):
    def __init__(self, settings: Settings, kind: str, stop_event: threading.Event):
        super().__init__(daemon=True)
        self.settings, self.kind, self.stop_event = settings, kind, stop_event
        self.submitted, self.calls_ms, self.error = 0, [], None
        self.checks = 0  # backlog reads: transactions of the bench, not of jobfence

    def run(self) -> None:
        from jobfence import Client
        try:
            with Client(self.settings.url, self.settings.redis_url) as client, \
                    connect(self.settings.url) as conn:
                specs = [(self.kind, {})] * PER_CALL
                while not self.stop_event.is_set():
                    self.checks += 1
                    if scalar(conn, "SELECT count(*) FROM jobs.job WHERE status = 'queued'") > BACKLOG:
                        time.sleep(0.02)
                        continue
                    t = time.perf_counter()
                    client.submit_many(specs)
                    self.calls_ms.append((time.perf_counter() - t) * 1000)
                    self.submitted += PER_CALL
        except BaseException as exc:  # noqa: BLE001 — reported by the caller
            self.error = exc


def start_workers(settings: Settings, n: int, batch: int, tag: str) -> list:
    env = {"JOBFENCE_DATABASE_URL": settings.url, "JOBFENCE_REDIS_URL": settings.redis_url,
           "JOBFENCE_EXAMPLE_QUEUE": settings.queue}
    return [spawn([str(JOBFENCE), "worker", "--app", "jobfence.examples:app", "--batch", str(batch)],
                  settings.work / f"worker_{tag}_{i}.log", env) for i in range(n)]


def start_relay(settings: Settings):
    env = {"JOBFENCE_DATABASE_URL": settings.url, "JOBFENCE_REDIS_URL": settings.redis_url}
    return spawn([str(JOBFENCE), "relay", "--queue", settings.queue], settings.work / "relay.log", env)


def wait_ready(settings: Settings, admin, client, kind: str, procs: list, timeout: float = 60) -> None:
    """A probe job done means a worker declared the kinds, popped, claimed and reported."""
    deadline = time.monotonic() + timeout
    while not scalar(admin, "SELECT count(*) FROM jobs.job_type WHERE kind = %s AND queue = %s",
                     (kind, settings.queue)):
        if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
            raise RuntimeError(f"workers did not declare {kind}:\n{tail(procs[0].args_log)}")
        time.sleep(0.05)
    job_id = client.submit(kind, {})
    while time.monotonic() < deadline:
        if scalar(admin, "SELECT status::text FROM jobs.job WHERE id = %s", (job_id,)) == "done":
            return
        for p in procs:
            if p.poll() is not None:
                raise RuntimeError(f"worker exited with {p.returncode}:\n{tail(p.args_log)}")
        time.sleep(0.05)
    raise RuntimeError("workers did not finish a probe job within 60 s:\n"
                       + tail(procs[0].args_log))


def percentiles(admin, t1, t2) -> dict:
    row = admin.execute("""
        SELECT percentile_cont(ARRAY[0.5, 0.95, 0.99]) WITHIN GROUP (ORDER BY extract(epoch FROM claimed_at - created_at)),
               percentile_cont(ARRAY[0.5, 0.95, 0.99]) WITHIN GROUP (ORDER BY extract(epoch FROM finished_at - created_at))
          FROM jobs.job WHERE status = 'done' AND created_at >= %s AND created_at < %s""", (t1, t2)).fetchone()
    if row[0] is None:
        return {}
    return {"start": [float(x) * 1000 for x in row[0]], "done": [float(x) * 1000 for x in row[1]]}


def cdf_sample(admin, t1, t2, points: int = 400) -> dict:
    rows = admin.execute("""
        SELECT extract(epoch FROM claimed_at - created_at) * 1000, extract(epoch FROM finished_at - created_at) * 1000
          FROM jobs.job WHERE status = 'done' AND created_at >= %s AND created_at < %s
         ORDER BY random() LIMIT %s""", (t1, t2, points)).fetchall()
    return {"start_ms": sorted(float(r[0]) for r in rows), "done_ms": sorted(float(r[1]) for r in rows)}


def calls_per_job(admin, t1, t2) -> dict:
    """How many jobs each claiming and each completing transaction carried: the batch the
    workers really got. Every job of one call shares its event's `at` (the transaction's
    now()) and worker."""
    row = admin.execute("""
        SELECT count(*) FILTER (WHERE reason = 'claimed')::float
                   / nullif(count(DISTINCT (worker, at)) FILTER (WHERE reason = 'claimed'), 0),
               count(*) FILTER (WHERE reason = 'completed')::float
                   / nullif(count(DISTINCT (worker, at)) FILTER (WHERE reason = 'completed'), 0)
          FROM jobs.event WHERE at >= %s AND at < %s AND reason IN ('claimed', 'completed')""",
                        (t1, t2)).fetchone()
    return {"claim": row[0], "complete": row[1]}


def run_config(settings: Settings, admin, client, workers: int, batch: int, handler: str,
               kind: str, rest: bool) -> dict:
    tag = f"{workers}x{batch}_{handler}"
    reset(admin)
    procs = start_workers(settings, workers, batch, tag)
    for i, p in enumerate(procs):
        p.args_log = settings.work / f"worker_{tag}_{i}.log"
    try:
        wait_ready(settings, admin, client, kind, procs)
        stop_event = threading.Event()
        producers = [Producer(settings, kind, stop_event) for _ in range(PRODUCERS)]
        for p in producers:
            p.start()
        time.sleep(1.0)  # warm-up: queue filled, connections and prepared statements made
        windows = []
        counters = Counters(admin, settings.dbname)
        before = counters.read()
        checks = sum(p.checks for p in producers)
        for rep in range(settings.reps):
            t1 = scalar(admin, "SELECT clock_timestamp()")
            time.sleep(window_seconds(settings))
            t2 = scalar(admin, "SELECT clock_timestamp()")
            windows.append((t1, t2))
        # Counters lag by up to a second at both ends alike, so the window's difference holds.
        spent = Counters.delta(before, counters.read())
        spent["xact"] -= sum(p.checks for p in producers) - checks + 2 * settings.reps
        prof = None
        if settings.profile and (workers, batch, handler) == JUDGED:
            # The producers are threads of this process: its profile is theirs (the main
            # thread only sleeps meanwhile).
            prof = profile.record({f"worker-{tag}": procs[0].pid, f"producers-{tag}": os.getpid()},
                                  window_seconds(settings) * 2)
        stop_event.set()
        for p in producers:
            p.join(30)
            if p.error:
                raise p.error
        # Drain what the producers left so every windowed job has its finish time.
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and scalar(
                admin, "SELECT count(*) FROM jobs.job WHERE status IN ('queued', 'processing')"):
            time.sleep(0.1)
        calls = sorted(ms for p in producers for ms in p.calls_ms)
        rates, lat = [], []
        for t1, t2 in windows:
            done = scalar(admin, "SELECT count(*) FROM jobs.job WHERE status = 'done' "
                          "AND finished_at >= %s AND finished_at < %s", (t1, t2))
            rates.append(done / (t2 - t1).total_seconds())
            lat.append(percentiles(admin, t1, t2))
        out = {"workers": workers, "batch": batch, "handler": handler, "kind": kind,
               "producers": PRODUCERS, "per_call": PER_CALL,
               "jobs_per_s": figure(rates, "jobs/s"),
               # the transactions of workers, producers and relay in the scratch database (the
               # bench's own reads taken off) per job finished in the windows
               "transactions_per_job": spent["xact"] / max(1, sum(r * (t2 - t1).total_seconds()
                                                              for r, (t1, t2) in zip(rates, windows))),
               "wal_bytes_per_job": spent["lsn"] / max(1, sum(r * (t2 - t1).total_seconds()
                                                         for r, (t1, t2) in zip(rates, windows))),
               "jobs_per_call": calls_per_job(admin, windows[0][0], windows[-1][1]),
               "submit_many_ms": figure([calls[len(calls) // 2]] if calls else [], "ms"),
               "cdf": cdf_sample(admin, windows[0][0], windows[-1][1])}
        for which in ("start", "done"):
            for i, q in enumerate(("p50", "p95", "p99")):
                out[f"submit_to_{which}_{q}"] = figure([l[which][i] for l in lat if l], "ms")
        progress(f"e2e {tag}: {out['jobs_per_s']['median']:,.0f} jobs/s "
                 f"(runs {', '.join(f'{r:,.0f}' for r in rates)}), "
                 f"submit→done p50 {out['submit_to_done_p50']['median'] or 0:.1f} ms")
        if prof:
            out["profile"] = prof
        if rest:
            out["at_rest"] = latency.run(settings, admin, client, kind)
        out["worker_rss_mb"] = figure([peak_rss_mb(p.pid) for p in procs], "MB")
        return out
    finally:
        for p in procs:
            stop(p)


def run(settings: Settings, admin) -> dict:
    from jobfence import Client
    found = kinds()
    results = {"configs": [], "async_kind": found["async"]}
    if not found["async"]:
        results["async_skipped"] = "the example app has no async no-op kind"
        progress("e2e: no async no-op kind in jobfence.examples: async runs skipped")
    relay = start_relay(settings)
    try:
        with Client(settings.url, settings.redis_url) as client:
            for workers, batch, handler in configs(settings, bool(found["async"])):
                kind = found[handler]
                progress(f"e2e {workers} worker(s) x batch {batch}, {handler} ({kind}) ...")
                try:
                    results["configs"].append(run_config(
                        settings, admin, client, workers, batch, handler, kind,
                        rest=(workers, batch, handler) == JUDGED))
                except Exception as exc:  # noqa: BLE001 — one broken configuration, not the run
                    progress(f"e2e {workers}x{batch} {handler} failed: {exc}")
                    results["configs"].append({"workers": workers, "batch": batch,
                                               "handler": handler, "error": str(exc)[:2000]})
    finally:
        stop(relay)
    reset(admin)
    return results
