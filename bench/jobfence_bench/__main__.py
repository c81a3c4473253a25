"""bench/run's body: runs the sections in order on the scratch database bench/run made, then
prints the table and writes the JSON and the charts. Stops its processes on any exit."""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from . import api, ceilings, e2e, judged, notify, observe, peers, pooler, report, scale, sqlpath
from .common import RESULTS, ROOT, Settings, connect, create_plain_table, progress, scalar, stop_all

SECTIONS = ("ceilings", "sql", "notify", "observe", "e2e", "judged", "api", "scale", "pooler", "peers")


def _terminate(signum, frame):
    # Ctrl-C reaches this process twice (from the terminal and from bench/run): the second
    # must not interrupt the clean-up the first one started.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise KeyboardInterrupt(f"signal {signum}")


def _local(url: str) -> None:
    # Everything the bench starts or talks to is on this machine.
    if "@127.0.0.1" not in url and "//127.0.0.1" not in url:
        sys.exit(f"bench: refusing a non-local URL: {url}")


def meta(admin, settings: Settings) -> dict:
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    dirty = bool(subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--", "db", "py"],
                                capture_output=True, text=True).stdout.strip())
    functions = [r[0] for r in admin.execute(
        "SELECT p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
        "WHERE n.nspname = 'jobs' ORDER BY 1").fetchall()]
    return {"date": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "quick": settings.quick,
            "reps": settings.reps, "seconds_per_run": settings.seconds,
            "commit": commit + ("+dirty" if dirty else ""),
            "server": scalar(admin, "SHOW server_version"),
            "synchronous_commit": scalar(admin, "SHOW synchronous_commit"),
            "shared_preload_libraries": scalar(admin, "SHOW shared_preload_libraries"),
            "shared_buffers": scalar(admin, "SHOW shared_buffers"),
            "cpus": os.cpu_count(), "load_avg_at_start": os.getloadavg(),
            "jobs_functions": functions}


def main() -> int:
    ap = argparse.ArgumentParser(prog="bench/run")
    ap.add_argument("--quick", action="store_true", help="a smaller run, under 3 minutes")
    ap.add_argument("--profile", action="store_true",
                    help="py-spy one worker of the judged configuration (py-spy on PATH)")
    ap.add_argument("--only", action="append", choices=SECTIONS, help="run only these sections")
    ap.add_argument("--peers", action="store_true",
                    help="run the peers section (PgQueuer, procrastinate, Celery, RQ beside the judged "
                         "configuration); the same as --only peers")
    args = ap.parse_args()
    if args.peers:
        args.only = (args.only or []) + ["peers"]
    url = os.environ["JOBFENCE_BENCH_URL"]
    redis_url = os.environ.get("JOBFENCE_BENCH_REDIS_URL", "redis://127.0.0.1:6379/14")
    _local(url)
    _local(redis_url)
    if os.environ.get("JOBFENCE_BENCH_PEERS_REDIS_URL"):
        _local(os.environ["JOBFENCE_BENCH_PEERS_REDIS_URL"])
    signal.signal(signal.SIGTERM, _terminate)
    signal.signal(signal.SIGINT, _terminate)
    # Through PgBouncer and the peers are part of the full run; --quick takes them only when
    # asked (--only, --peers).
    sections = args.only or [s for s in SECTIONS if not (args.quick and s in ("pooler", "peers"))]
    settings = Settings(url=url, redis_url=redis_url, quick=args.quick,
                        seconds=1.0 if args.quick else 5.0, queue=f"bench_{os.getpid()}",
                        work=Path(tempfile.mkdtemp(prefix="jobfence_bench_")), profile=args.profile)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    results: dict = {}
    started = time.monotonic()
    try:
        with connect(url) as admin:
            results["meta"] = meta(admin, settings)
            create_plain_table(admin)
            if "ceilings" in sections:
                progress("1. pgbench ceilings")
                results["ceilings"] = ceilings.run(settings, admin)
            if "sql" in sections:
                progress("2. the SQL path alone")
                results["sql_path"] = sqlpath.run(settings, admin)
                results["submit"] = sqlpath.submit_compare(settings, admin)
                results["sql_profile"] = sqlpath.function_profile(settings, admin)
            if "notify" in sections:
                progress("2b. NOTIFY under many writers: 1 to 64 single-job producers")
                results["notify"] = notify.run(settings, admin)
            if "observe" in sections:
                progress("2a. what the metrics rollup costs the SQL path")
                results["observe"] = observe.run(settings, admin)
            if "e2e" in sections:
                progress("3./4./6. end to end, latency at rest, worker RSS")
                results["e2e"] = e2e.run(settings, admin)
            if "judged" in sections:
                progress("3a. the judged configuration (jobs.submit_many + relay + 2 workers)")
                results["judged"] = judged.run(settings, admin)
            if "api" in sections:
                progress("7. the HTTP API (jobfence api: POST /jobs, POST /jobs/batch)")
                results["api"] = api.run(settings, admin)
            if "scale" in sections:
                progress("5. scale")
                results["scale"] = scale.run(settings, admin)
            if "pooler" in sections:
                progress("8. through PgBouncer: 1 to 8 worker processes")
                results["pooler"] = pooler.run(settings, admin)
            if "peers" in sections:
                progress("9. beside the peers: PgQueuer, procrastinate, Celery, RQ, alternating with the judged run")
                results["peers"] = peers.run(settings, admin)
    except KeyboardInterrupt as exc:
        progress(f"interrupted ({exc}): cleaning up")
        results["interrupted"] = str(exc)
        return 130
    finally:
        stop_all()
        _forget_redis(settings)
        results.setdefault("meta", {})["elapsed_s"] = round(time.monotonic() - started, 1)
        if len(results) > 1:
            print(report.table(results))
            path, charts = report.write(results, RESULTS, stamp, latest="interrupted" not in results)
            progress(f"wrote {path.relative_to(ROOT)}" + "".join(f", {c.relative_to(ROOT)}" for c in charts))
        failed = [c for c in results.get("e2e", {}).get("configs", []) if c.get("error")]
        failed += [results["api"]] if results.get("api", {}).get("error") else []
        failed += [s for s in results.get("peers", {}).get("systems", {}).values() if s.get("errors")]
        if failed or sys.exc_info()[0] is not None:  # keep the logs of a run that failed
            progress(f"worker and relay logs kept in {settings.work}")
        else:
            shutil.rmtree(settings.work, ignore_errors=True)
        progress(f"done in {results['meta']['elapsed_s']:.0f} s")
    return 0


def _forget_redis(settings: Settings) -> None:
    try:
        import redis

        from .common import redis_keys
        r = redis.Redis.from_url(settings.redis_url, socket_timeout=2)
        r.delete(*redis_keys(settings))
    except Exception:  # noqa: BLE001 — Redis away at the end changes no figure
        pass


if __name__ == "__main__":
    sys.exit(main())
