"""Scaling out through PgBouncer (docs/scaling.md): the end-to-end configuration of e2e.py
with 1, 2, 4 and 8 worker processes (batch 100), every worker and producer connected
through a private PgBouncer in transaction mode (the test suite's, py/tests/pooler_helpers.py)
with a server pool of eight sessions, and the relay LISTENing directly. Against, in the same
run, 2 workers on direct connections: the ratio is the pooler's price at equal load, and the
curve over process counts is where this machine's PostgreSQL stops giving more."""

from __future__ import annotations

import collections
import dataclasses
import os
import shutil
import sys
import tempfile
import threading
from pathlib import Path

from . import e2e
from .common import ROOT, connect, progress

POOL_SIZE = 8


class WaitSampler(threading.Thread):
    """What the scratch database's active backends are doing, sampled every 50 ms: on CPU
    (no wait event), or waiting on a lock, an LWLock (WAL insertion, buffer mapping...), I/O
    (WAL flush, data files) or the client. Where the samples pile up is the limit."""

    def __init__(self, url: str):
        super().__init__(daemon=True)
        self.url, self.stop_event = url, threading.Event()
        self.counts: collections.Counter = collections.Counter()
        # Which call the backends waiting on a row lock were running (the function named).
        self.lock_waits: collections.Counter = collections.Counter()

    def run(self) -> None:
        with connect(self.url) as conn:
            while not self.stop_event.wait(0.05):
                for kind, event, call, n in conn.execute(
                        "SELECT coalesce(wait_event_type, 'CPU'), coalesce(wait_event, ''),"
                        "       CASE WHEN wait_event_type = 'Lock' THEN substring(query FROM 'jobs\\.[a-z_]+') END,"
                        "       count(*)"
                        "  FROM pg_stat_activity WHERE datname = current_database()"
                        "   AND state = 'active' AND pid <> pg_backend_pid() GROUP BY 1, 2, 3"):
                    self.counts[f"{kind}:{event}" if event else kind] += n
                    if call:
                        self.lock_waits[call] += n

    def shares(self) -> dict:
        self.stop_event.set()
        self.join(5)
        total = sum(self.counts.values()) or 1
        out = {k: round(v / total, 3) for k, v in self.counts.most_common(6)}
        waits = sum(self.lock_waits.values()) or 1
        out["lock waits by call"] = {k: round(v / waits, 2) for k, v in self.lock_waits.most_common(3)}
        return out


def _bouncer_class():
    sys.path.insert(0, str(ROOT / "py" / "tests"))
    from pooler_helpers import PGBOUNCER, PgBouncer
    return PGBOUNCER, PgBouncer


def run(settings, admin) -> dict:
    from jobfence import Client

    binary, PgBouncer = _bouncer_class()
    if not Path(binary).exists():
        progress("pooler: pgbouncer is not installed (scripts/setup --test): skipped")
        return {"skipped": "pgbouncer is not installed"}
    counts = (1, 4) if settings.quick else (1, 2, 4, 8)
    kind = e2e.kinds()["sync"]
    out = {"pool_size": POOL_SIZE, "direct": None, "through_pgbouncer": []}
    relay = e2e.start_relay(settings)
    try:
        with Client(settings.url, settings.redis_url) as client:
            progress("pooler: 2 workers x batch 100, direct connections ...")
            out["direct"] = e2e.run_config(settings, admin, client, 2, 100, "sync", kind, rest=False)
    finally:
        e2e.stop(relay)
    workdir = Path(tempfile.mkdtemp(prefix="jobfence-bench-pgbouncer-"))
    bouncer = PgBouncer(workdir, settings.url, pool_size=POOL_SIZE).start()
    saved = {k: os.environ.get(k) for k in ("JOBFENCE_DATABASE_POOLER", "JOBFENCE_LISTEN_DATABASE_URL")}
    os.environ["JOBFENCE_DATABASE_POOLER"] = "transaction"
    os.environ["JOBFENCE_LISTEN_DATABASE_URL"] = settings.url
    pooled = dataclasses.replace(settings, url=bouncer.url(settings.url))
    relay = e2e.start_relay(pooled)
    try:
        with Client(pooled.url, settings.redis_url) as client:
            for n in counts:
                progress(f"pooler: {n} worker(s) x batch 100 through pgbouncer ...")
                sampler = WaitSampler(settings.url)
                sampler.start()
                try:
                    found = e2e.run_config(pooled, admin, client, n, 100, "sync", kind, rest=False)
                    found["pg_waits"] = sampler.shares()
                    progress(f"pooler {n} workers: backends {found['pg_waits']}")
                except Exception as exc:  # noqa: BLE001 — one broken configuration, not the run
                    sampler.shares()
                    progress(f"pooler {n} workers failed: {exc}")
                    found = {"workers": n, "error": str(exc)[:2000]}
                out["through_pgbouncer"].append(found)
    finally:
        e2e.stop(relay)
        bouncer.stop()
        shutil.rmtree(workdir, ignore_errors=True)
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return out
