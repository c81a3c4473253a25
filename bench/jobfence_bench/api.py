"""The HTTP API: `jobfence api --no-auth` on a free port of 127.0.0.1, against the scratch
database and the bench's Redis. `POST /jobs` requests/s and p50/p99 latency at 1, 16 and 64
concurrent clients (aiohttp, keep-alive, one connection per client), each run paired
with a pgbench run of a plain single-row INSERT into plain_job from as many clients, so the
ratio says what the HTTP hop, the validation, `jobs.submit` and the Redis push cost on top of
the cheapest write PostgreSQL can do. Then `POST /jobs/batch` with 1,000 specs per request,
against a pgbench 1,000-row literal INSERT.

The load generator is a Python process on the same two cores as the server and PostgreSQL:
its CPU per request is reported next to the server's, so a reader can see which one ran out
of core first."""

from __future__ import annotations

import asyncio
import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from . import ceilings
from .common import (JOBFENCE, PLAIN_COLUMNS, ROOT, Settings, cpu_ticks, figure, peak_rss_mb, postgres_ticks,
                     progress, reset, scalar, spawn, stop, tail)

CLIENTS = (1, 16, 64)
BATCH = 1000
BATCH_CLIENTS = 2       # as the ceilings' pgbench: two producers
WARMUP_S = 0.5          # connections opened, the server's first requests out of the figures
KIND = "bench_api"
START_TIMEOUT_S = 60


def _aiohttp():
    """aiohttp from the `bench` extra of pyproject.toml, installed into the venv when missing.
    Not httpx: its connection pool costs more CPU per request the more requests are in
    flight, and at 64 clients the load generator, not the API, would be measured."""
    try:
        import aiohttp
        return aiohttp
    except ImportError:
        pass
    text = (ROOT / "pyproject.toml").read_text()
    spec = re.search(r'^bench = \[.*?"(aiohttp[^"]*)"', text, re.M)
    spec = spec.group(1) if spec else "aiohttp"
    progress(f"api: installing {spec} into the venv (the bench extra)")
    subprocess.run([str(Path(sys.executable).parent / "pip"), "install", "-q", spec], check=True)
    import importlib
    importlib.invalidate_caches()
    import aiohttp
    return aiohttp


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _tree_ticks(pid: int) -> float:
    """CPU ticks of a process and its descendants (a server may fork workers)."""
    parent = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                parent[int(d.name)] = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                pass
    tree, grew = {pid}, True
    while grew:
        more = {p for p, pp in parent.items() if pp in tree} - tree
        tree |= more
        grew = bool(more)
    return sum(cpu_ticks(p) for p in tree)


def _cpu(api_pid: int, client_first: bool) -> dict[str, float]:
    """CPU seconds so far of this process (the load generator), the server's tree and
    PostgreSQL. Reading /proc costs this process CPU too: it is kept outside the interval."""
    hz = os.sysconf("SC_CLK_TCK")
    client = time.process_time() if client_first else None
    out = {"api": _tree_ticks(api_pid) / hz, "postgres": sum(postgres_ticks().values()) / hz}
    out["client"] = client if client_first else time.process_time()
    return out


def start_api(settings: Settings):
    port = _free_port()
    log = settings.work / "api.log"
    # --no-auth refuses to start beside tokens: a JOBFENCE_API_TOKENS of the caller's must
    # not end the section.
    env = {"JOBFENCE_DATABASE_URL": settings.url, "JOBFENCE_REDIS_URL": settings.redis_url,
           "JOBFENCE_API_TOKENS": ""}
    proc = spawn([str(JOBFENCE), "api", "--no-auth", "--host", "127.0.0.1", "--port", str(port)],
                 log, env)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"jobfence api exited with {proc.returncode}:\n{tail(log)}")
        try:
            with urllib.request.urlopen(base + "/healthz", timeout=2) as resp:
                if resp.status == 200:
                    return proc, base
        except OSError:
            pass
        if time.monotonic() > deadline:
            stop(proc)
            raise RuntimeError(f"jobfence api did not answer /healthz 200 within "
                               f"{START_TIMEOUT_S} s:\n{tail(log)}")
        time.sleep(0.1)


async def _load(base: str, clients: int, seconds: float, path: str, body, api_pid: int) -> dict:
    """`clients` tasks, each one request at a time on its own keep-alive connection, for
    WARMUP_S untimed and then `seconds` timed."""
    aiohttp = _aiohttp()
    out = {"ok": 0, "errors": 0, "first_error": None, "latencies": [], "warmup_ok": 0,
           "sample": None}
    connector = aiohttp.TCPConnector(limit=clients)
    timeout = aiohttp.ClientTimeout(total=30)
    async with aiohttp.ClientSession(base, connector=connector, timeout=timeout) as client:

        async def one(until: float, timed: bool) -> None:
            while time.perf_counter() < until:
                t = time.perf_counter()
                try:
                    async with client.post(path, json=body) as r:
                        text = await r.text()
                        status = r.status
                except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
                    out["errors"] += 1
                    out["first_error"] = out["first_error"] or repr(exc)[:300]
                    continue
                dt = time.perf_counter() - t
                if status != 202:
                    out["errors"] += 1
                    out["first_error"] = out["first_error"] or f"HTTP {status}: {text[:300]}"
                elif timed:
                    out["ok"] += 1
                    out["latencies"].append(dt * 1000)
                else:
                    out["warmup_ok"] += 1
                    if out["sample"] is None:
                        out["sample"] = json.loads(text)

        await asyncio.gather(*(one(time.perf_counter() + WARMUP_S, False) for _ in range(clients)))
        before = _cpu(api_pid, client_first=False)
        t0 = time.perf_counter()
        await asyncio.gather(*(one(t0 + seconds, True) for _ in range(clients)))
        out["elapsed"] = time.perf_counter() - t0
        after = _cpu(api_pid, client_first=True)
    requests = max(1, out["ok"] + out["errors"])
    out["cpu_us_per_request"] = {k: (after[k] - before[k]) / requests * 1e6 for k in after}
    return out


def _pct(xs: list[float], q: float) -> float | None:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else None


def _forget(settings: Settings) -> None:
    # Nobody pops these ids; keep the bench's Redis database small between runs.
    try:
        import redis

        from .common import redis_keys
        redis.Redis.from_url(settings.redis_url, socket_timeout=2).delete(*redis_keys(settings))
    except Exception:  # noqa: BLE001 — a leftover list changes no figure
        pass


def _run_pair(settings: Settings, admin, api_pid: int, base: str, clients: int, path: str,
              body, per_request: int, script: Path) -> dict:
    """One timed HTTP run and, next to it, one pgbench run of the plain statement."""
    reset(admin)
    _forget(settings)
    r = asyncio.run(_load(base, clients, settings.seconds, path, body, api_pid))
    accepted = r["ok"] + r["warmup_ok"]
    in_db = scalar(admin, "SELECT count(*) FROM jobs.job WHERE kind = %s", (KIND,))
    reset(admin)
    _forget(settings)
    ceiling = ceilings.pgbench(settings, script, clients=clients)["tps"] * per_request
    rate = r["ok"] * per_request / r["elapsed"]
    return {"rate": rate, "ceiling": ceiling, "p50": _pct(r["latencies"], 0.5),
            "p99": _pct(r["latencies"], 0.99), "errors": r["errors"], "first_error": r["first_error"],
            "jobs_accepted": accepted * per_request, "jobs_in_db": in_db, "sample": r["sample"],
            "cpu_us_per_request": r["cpu_us_per_request"]}


def _summary(runs: list[dict], unit: str, clients: int, per_request: int) -> dict:
    cpu = {k: figure([r["cpu_us_per_request"][k] for r in runs], "µs/request")
           for k in runs[0]["cpu_us_per_request"]}
    errors = sum(r["errors"] for r in runs)
    return {"clients": clients, "jobs_per_request": per_request,
            "rate": figure([r["rate"] for r in runs], unit),
            "latency_p50_ms": figure([r["p50"] for r in runs], "ms"),
            "latency_p99_ms": figure([r["p99"] for r in runs], "ms"),
            "ceiling": figure([r["ceiling"] for r in runs], unit),
            "ratio_to_ceiling": figure([r["rate"] / r["ceiling"] for r in runs if r["ceiling"]], "x"),
            "cpu_us_per_request": cpu, "errors": errors,
            "first_error": next((r["first_error"] for r in runs if r["first_error"]), None),
            # every 202 must be a row: an API that answers before it commits would show here
            "jobs_accepted": sum(r["jobs_accepted"] for r in runs),
            "jobs_in_db": sum(r["jobs_in_db"] for r in runs),
            "sample_response": next((r["sample"] for r in runs if r["sample"]), None)}


def run(settings: Settings, admin) -> dict:
    help_ = subprocess.run([str(JOBFENCE), "api", "--help"], capture_output=True, text=True)
    if help_.returncode != 0:
        progress("api: `jobfence api` is not available: section skipped")
        return {"skipped": f"`jobfence api --help` exited {help_.returncode}: "
                           f"{(help_.stderr or help_.stdout).strip()[-300:]}"}
    _aiohttp()
    # A kind on this run's own queue, so the pushed ids land in keys the bench deletes.
    admin.execute("SELECT jobs.define_type(%s, %s)", (KIND, settings.queue))
    single = settings.work / "api_ceiling_insert.sql"
    single.write_text(f"INSERT INTO plain_job ({PLAIN_COLUMNS}) VALUES "
                      f"{ceilings.plain_values(1)} RETURNING id;\n")
    many = settings.work / "api_ceiling_insert_1000.sql"
    many.write_text(f"INSERT INTO plain_job ({PLAIN_COLUMNS}) VALUES "
                    f"{ceilings.plain_values(BATCH)} RETURNING id;\n")
    try:
        return _measure(settings, admin, single, many)
    except Exception as exc:  # noqa: BLE001 — reported in the table; the other sections stand
        progress(f"api: failed: {exc}")
        reset(admin)
        return {"error": str(exc)[:2000]}


def _measure(settings: Settings, admin, single: Path, many: Path) -> dict:
    proc, base = start_api(settings)
    # --quick leaves out 64 clients: the API answers no faster there than at 16 (its one
    # process is the bound), and the quick run must stay short.
    clients_run = CLIENTS[:2] if settings.quick else CLIENTS
    results: dict = {"clients": list(clients_run), "seconds_per_run": settings.seconds,
                     "warmup_s": WARMUP_S, "kind": KIND, "post_jobs": [], "batch": None}
    try:
        for clients in clients_run:
            runs = []
            for rep in range(settings.reps):
                r = _run_pair(settings, admin, proc.pid, base, clients, "/jobs",
                              {"kind": KIND, "payload": {"n": 1}}, 1, single)
                runs.append(r)
                progress(f"api POST /jobs, {clients} client(s), run {rep + 1}/{settings.reps}: "
                         f"{r['rate']:,.0f} req/s, p50 {r['p50'] or 0:.2f} ms, p99 {r['p99'] or 0:.2f} ms; "
                         f"pgbench INSERT {r['ceiling']:,.0f} tps ({r['rate'] / r['ceiling']:.3f}x)"
                         + (f"; {r['errors']} errors: {r['first_error']}" if r["errors"] else ""))
            results["post_jobs"].append(_summary(runs, "req/s", clients, 1))
        specs = {"jobs": [{"kind": KIND, "payload": {"n": i}} for i in range(BATCH)]}
        runs = []
        for rep in range(settings.reps):
            r = _run_pair(settings, admin, proc.pid, base, BATCH_CLIENTS, "/jobs/batch", specs,
                          BATCH, many)
            runs.append(r)
            progress(f"api POST /jobs/batch ({BATCH:,} specs), {BATCH_CLIENTS} clients, run "
                     f"{rep + 1}/{settings.reps}: {r['rate']:,.0f} jobs/s, p50 {r['p50'] or 0:.1f} ms; "
                     f"pgbench {BATCH:,}-row INSERT {r['ceiling']:,.0f} jobs/s ({r['rate'] / r['ceiling']:.3f}x)"
                     + (f"; {r['errors']} errors: {r['first_error']}" if r["errors"] else ""))
        results["batch"] = _summary(runs, "jobs/s", BATCH_CLIENTS, BATCH)
        results["api_peak_rss_mb"] = peak_rss_mb(proc.pid)
    finally:
        stop(proc)
        _forget(settings)
    reset(admin)
    return results

