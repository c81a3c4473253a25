"""Beside the peers: the judged configuration (judged.py) alternating, in the same run, with
PgQueuer, procrastinate, Celery and RQ on the same no-op workload (60,000 jobs, 20,000 with
--quick; a producer submitting while the consumers consume), each in its fast configuration on
this machine's 2 cores (docs/performance.md, "Beside the peers"). Every system's jobs/s comes
from its own records of completion, first submit to last finish; the ratios are jobfence's run
over the peer's run of the same round, so both saw the same minute of a shared machine.

The peers run from bench/peers/*_run.py under a virtualenv of their own (bench/.venv-peers,
made from bench/peers/requirements.txt when missing or stale), the PostgreSQL ones each in a
scratch database dropped after its run, the Redis ones on a redis-server of the section's own
(or, with JOBFENCE_BENCH_PEERS_REDIS_URL, under a key prefix deleted after each run)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time

import psycopg

from . import ceilings, judged
from .common import ROOT, Settings, figure, progress, reset, spawn, stop, tail

PEERS = ("pgqueuer", "procrastinate", "celery", "rq")
PEERS_DIR = ROOT / "bench" / "peers"
VENV = ROOT / "bench" / ".venv-peers"
REQUIREMENTS = PEERS_DIR / "requirements.txt"
POSTGRES_PEERS = ("pgqueuer", "procrastinate")
# Issue 31's target: the judged configuration at 1.5 x the fastest peer.
TARGET = 1.5

# Each peer's fast configuration on 2 cores, chosen by trying the others in docs/performance.md.
CONFIG = {
    "pgqueuer": ["--processes", "2", "--concurrency", "2", "--batch", "100", "--per-call", "1000"],
    "procrastinate": ["--processes", "2", "--concurrency", "10", "--per-call", "1000", "--analyze"],
    "celery": ["--processes", "2", "--pool", "solo", "--prefetch", "64"],
    "rq": ["--processes", "2", "--per-call", "1000"],
}

# What each one does not guarantee that jobfence does (docs/performance.md says why).
NOT_GUARANTEED = {
    "jobfence": "(fenced leases, every transition kept, retries and reaping in the database)",
    "pgqueuer": "no fencing: a job re-picked after a missed heartbeat can be finished by both holders; "
                "deletes finished jobs (a log row stays)",
    "procrastinate": "no fencing: finish_job checks the status, not the holder; a stalled job waits "
                     "for a retry you schedule",
    "celery": "ack-first: a task is acked as it starts, so a crash loses it (at most once); no record "
              "of finished tasks without a result backend; Redis persistence only",
    "rq": "no fencing; a job whose worker died is failed, not retried unless Retry is set; finished jobs "
          "expire (result_ttl); Redis persistence only",
}


def _venv_python() -> str:
    return str(VENV / "bin" / "python")


def ensure_venv() -> str | None:
    """Make bench/.venv-peers from the requirements when it is missing or they changed.
    Returns why the peers cannot run, or None."""
    if not REQUIREMENTS.exists():
        return f"{REQUIREMENTS.relative_to(ROOT)} is missing"
    want = hashlib.sha256(REQUIREMENTS.read_bytes()).hexdigest()
    stamp = VENV / "requirements.sha256"
    if (VENV / "bin" / "python").exists() and stamp.exists() and stamp.read_text().strip() == want:
        return None
    progress(f"peers: installing {REQUIREMENTS.relative_to(ROOT)} into {VENV.relative_to(ROOT)} "
             "(once; the package's .venv is not touched)")
    steps = [] if (VENV / "bin" / "python").exists() else [[sys.executable, "-m", "venv", str(VENV)]]
    steps.append([_venv_python(), "-m", "pip", "install", "-q", "-r", str(REQUIREMENTS)])
    for step in steps:
        try:
            out = subprocess.run(step, capture_output=True, text=True, timeout=900)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"could not make {VENV.relative_to(ROOT)}: {exc}"
        if out.returncode != 0:
            last = [line for line in (out.stderr or out.stdout).splitlines() if line.strip()][-1:]
            return (f"could not make {VENV.relative_to(ROOT)} ({' '.join(step[:4])} …): "
                    + (last[0] if last else f"exit {out.returncode}"))
    stamp.write_text(want + "\n")
    return None


def _server(settings: Settings) -> str:
    return settings.url.rsplit("/", 1)[0]


def _drop(admin, name: str) -> None:
    admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def run_peer(settings: Settings, admin, system: str, jobs: int, rnd: int, redis_url: str) -> dict:
    """One run of one peer's driver: its figures, or the reason it failed."""
    tag = f"{system}_{rnd}"
    out, log = settings.work / f"peer-{tag}.json", settings.work / f"peer-{tag}.log"
    work = settings.work / f"peer-{tag}"
    work.mkdir(exist_ok=True)
    # Generous: a slow peer finishing late is a figure; only one stuck for good is an error.
    timeout = max(300.0, jobs / 50)
    args = [_venv_python(), str(PEERS_DIR / f"{system}_run.py"), "--jobs", str(jobs), "--work", str(work),
            "--timeout", str(timeout), *CONFIG[system]]
    db = f"{settings.dbname}_{system}"
    if system in POSTGRES_PEERS:
        _drop(admin, db)
        admin.execute(f'CREATE DATABASE "{db}"')
        args += ["--dsn", f"{_server(settings)}/{db}"]
    else:
        args += ["--redis-url", redis_url, "--redis-prefix", f"{_prefix()}{tag}"]
    proc = spawn(args, log, out=out)
    try:
        proc.wait(timeout + 120)
    except subprocess.TimeoutExpired:
        return {"system": system, "error": f"the driver did not finish within {timeout + 120:.0f} s"}
    finally:
        stop(proc)
        if system in POSTGRES_PEERS:
            _drop(admin, db)
    lines = out.read_text().strip().splitlines() if out.exists() else []
    if proc.returncode != 0 or not lines:
        return {"system": system, "error": tail(log, 6) or f"exit {proc.returncode}"}
    return json.loads(lines[-1])


def writes_alone(settings: Settings, admin) -> dict:
    """PostgreSQL's CPU per job for the package's writes without its functions (the same-writes
    ceiling) and for the job row alone (the bare ceiling: no rollup), each
    a pgbench run at batches of 100. With jobfence's workers and relay as measured beside them,
    what these writes allow at most (docs/performance.md, "What the writes allow")."""
    out = {}
    for name, make in (("same_writes", ceilings.same_writes_script), ("job_row", ceilings.script)):
        path = settings.work / f"peers_{name}_100.sql"
        path.write_text(make(100))
        reset(admin)
        r = ceilings.pgbench_cpu(settings, path, 100)
        out[name] = {"jobs_per_s": r["jobs_per_s"], "postgres_cpu_us_per_job": r["postgres_cpu_us_per_job"]}
    reset(admin)
    return out


def run_jobfence(settings: Settings, admin, jobs: int) -> dict:
    """judged.one_run, with the same figures the peers give, from jobs.job's rows; before it,
    in the same minute, the writes alone (writes_alone)."""
    alone = writes_alone(settings, admin)
    rss: dict = {}
    # one_run reads its rate from the run's rows (first created_at to last finished_at).
    rate, cpu, _ = judged.one_run(settings, admin, jobs, rss=rss)
    # The run's jobs are the last `jobs` ids (the probe job came before them).
    p50, p99, worst = admin.execute(
        "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY ms), percentile_cont(0.99) WITHIN GROUP (ORDER BY ms), max(ms) "
        "FROM (SELECT extract(epoch FROM finished_at - created_at)::float8 * 1000 AS ms "
        "      FROM jobs.job ORDER BY id DESC LIMIT %s) j", (jobs,)).fetchone()
    procs = [m for m in rss.get("workers", []) + [rss.get("relay")] if m]
    reset(admin)
    return {"system": "jobfence", "jobs": jobs, "jobs_per_s": rate, "span_s": jobs / rate,
            "measured_from": "jobs.job: created_at -> finished_at",
            "consumer_cpu_us_per_job": cpu["workers"] + cpu["relay"], "cpu_us_per_job": cpu,
            "writes_alone": alone,
            "latency_ms": {"p50": p50, "p99": p99, "max": worst},
            "rss": {"processes": len(procs), "max_mb": max(procs, default=None), "total_mb": sum(procs) or None,
                    "workers_mb": rss.get("workers"), "relay_mb": rss.get("relay")},
            "config": {"workers": 2, "batch": 100, "submit_many_per_call": judged.PER_CALL, "relay": True}}


def start_redis(settings: Settings) -> tuple[str, object]:
    """A redis-server of the section's own on a free port, configured as the shared one here
    (no snapshots, no append-only file). Not a database number on the shared server: other
    users of this machine flush theirs while tests run (seen on 13), which would take a run's
    queued jobs with it."""
    if shutil.which("redis-server") is None:
        raise RuntimeError("redis-server is not on PATH (Debian: apt-get install redis-server)")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = spawn(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                  "--dir", str(settings.work)], settings.work / "peers-redis.log")
    import redis
    deadline = time.monotonic() + 10
    while True:
        try:
            redis.Redis(port=port, socket_timeout=1).ping()
            return f"redis://127.0.0.1:{port}/0", proc
        except redis.RedisError:
            if time.monotonic() > deadline or proc.poll() is not None:
                stop(proc)
                raise RuntimeError(f"redis-server did not answer on port {port}: {tail(settings.work / 'peers-redis.log', 3)}")
            time.sleep(0.05)


def _prefix() -> str:
    return f"jfpeers_{os.getpid()}_"


def _forget_redis(redis_url: str) -> None:
    try:
        import redis
        r = redis.Redis.from_url(redis_url, socket_timeout=2)
        keys = list(r.scan_iter(match=f"{_prefix()}*", count=1000))
        for start in range(0, len(keys), 1000):
            r.delete(*keys[start:start + 1000])
    except Exception:  # noqa: BLE001 — Redis away at the end changes no figure
        pass


def run(settings: Settings, admin) -> dict:
    jobs = judged.JOBS // 3 if settings.quick else judged.JOBS
    rounds = 2 if settings.quick else 3
    why = ensure_venv()
    if why:
        progress(f"peers: skipped: {why}")
        return {"skipped": why}
    runs: dict[str, list[dict]] = {s: [] for s in ("jobfence",) + PEERS}
    redis_url, server, no_redis = os.environ.get("JOBFENCE_BENCH_PEERS_REDIS_URL"), None, None
    try:
        if not redis_url:
            try:
                redis_url, server = start_redis(settings)
            except RuntimeError as exc:  # the PostgreSQL peers can still run
                no_redis = str(exc)
        progress(f"peers: the Redis peers use {redis_url}"
                 + (" (a redis-server of this run)" if server else ", keys under a prefix of the run's")
                 if redis_url else f"peers: Celery and RQ cannot run: {no_redis}")
        for rnd in range(rounds):
            for system in ("jobfence",) + PEERS:
                t = time.monotonic()
                try:
                    if system not in ("jobfence",) + POSTGRES_PEERS and not redis_url:
                        raise RuntimeError(no_redis)
                    r = run_jobfence(settings, admin, jobs) if system == "jobfence" else \
                        run_peer(settings, admin, system, jobs, rnd, redis_url)
                except (RuntimeError, psycopg.Error) as exc:
                    r = {"system": system, "error": str(exc)}
                runs[system].append(r)
                if r.get("error"):
                    progress(f"peers round {rnd + 1}/{rounds}: {system} failed: {r['error'].splitlines()[-1][:150]}")
                    continue
                lat = r["latency_ms"]
                progress(f"peers round {rnd + 1}/{rounds}: {system}: {r['jobs_per_s']:,.0f} jobs/s, "
                         f"p50 {lat['p50']:,.0f} ms, p99 {lat['p99']:,.0f} ms, RSS {r['rss']['max_mb'] or 0:.0f} MB "
                         f"per process ({time.monotonic() - t:.0f} s)")
    finally:
        if server:
            stop(server)
        elif redis_url:
            _forget_redis(redis_url)
    return summarise(runs, jobs, rounds)


def summarise(runs: dict[str, list[dict]], jobs: int, rounds: int) -> dict:
    """Medians with min–max per system, and jobfence over each peer round by round."""
    base = runs["jobfence"]
    systems = {}
    for system, rs in runs.items():
        ok = [r for r in rs if not r.get("error")]
        ratios = [b["jobs_per_s"] / r["jobs_per_s"] for b, r in zip(base, rs)
                  if not b.get("error") and not r.get("error")] if system != "jobfence" else []
        systems[system] = {
            "version": next((r.get("version") for r in ok if r.get("version")), None),
            "config": next((r["config"] for r in ok), None),
            "jobs_per_s": figure([r["jobs_per_s"] for r in ok], "jobs/s"),
            "jobfence_over_it": figure(ratios, "x") if system != "jobfence" else None,
            "submit_per_s": figure([r.get("submit_per_s") for r in ok], "jobs/s"),
            "latency_p50_ms": figure([r["latency_ms"]["p50"] for r in ok], "ms"),
            "latency_p99_ms": figure([r["latency_ms"]["p99"] for r in ok], "ms"),
            "rss_max_mb": figure([r["rss"]["max_mb"] for r in ok], "MB"),
            "rss_total_mb": figure([r["rss"]["total_mb"] for r in ok], "MB"),
            "processes": next((r["rss"]["processes"] for r in ok), None),
            "measured_from": next((r["measured_from"] for r in ok), None),
            "not_guaranteed": NOT_GUARANTEED[system],
            "errors": [r["error"] for r in rs if r.get("error")],
            "runs": rs,
        }
    peers = [s for s in PEERS if systems[s]["jobs_per_s"]["median"]]
    fastest = max(peers, key=lambda s: systems[s]["jobs_per_s"]["median"], default=None)
    return {"jobs": jobs, "rounds": rounds, "order": ["jobfence", *PEERS], "systems": systems,
            "fastest_peer": fastest, "writes_allow": writes_allow(base, runs[fastest]) if fastest else None}


def writes_allow(base: list[dict], peer: list[dict], target: float = TARGET) -> dict:
    """Round by round, the most jobfence could reach if PostgreSQL spent on each job only what
    the writes alone cost it, the workers and relay as measured: cores / (the writes' CPU + the
    consumers' CPU) per job, over the fastest peer's run of the same round. And the CPU per
    job that `target` times that peer leaves for everything: what 1.5x has to fit in."""
    cores = os.cpu_count() or 1
    rounds = [(b, p) for b, p in zip(base, peer) if not b.get("error") and not p.get("error")
              and b.get("writes_alone")]
    out: dict = {"cores": cores, "target": target}
    for name in ("same_writes", "job_row"):
        pg = [b["writes_alone"][name]["postgres_cpu_us_per_job"] for b, _ in rounds]
        most = [cores * 1e6 / (cpu + b["consumer_cpu_us_per_job"]) for cpu, (b, _) in zip(pg, rounds)]
        out[name] = {"postgres_cpu_us_per_job": figure(pg, "µs/job"), "jobs_per_s": figure(most, "jobs/s"),
                     "over_peer": figure([m / p["jobs_per_s"] for m, (_, p) in zip(most, rounds)], "x")}
    out["measured"] = {k: figure([b["cpu_us_per_job"][k] for b, _ in rounds], "µs/job")
                       for k in ("postgres", "workers", "relay")}
    out["budget_us_per_job"] = figure([cores * 1e6 / (target * p["jobs_per_s"]) for _, p in rounds], "µs/job")
    return out
