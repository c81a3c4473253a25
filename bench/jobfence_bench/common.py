"""Shared pieces: settings, figures (median of runs with min–max), the admin connection,
table resets, WAL/transaction counters, child processes and progress lines."""

from __future__ import annotations

import os
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench" / "results"
JOBFENCE = ROOT / ".venv" / "bin" / "jobfence"
PLAIN_COLUMNS = "kind, queue, payload, max_retries, lease_timeout, timeout"


@dataclass
class Settings:
    url: str
    redis_url: str
    quick: bool
    reps: int = 3
    seconds: float = 3.0          # length of one timed run
    queue: str = "default"        # the e2e queue; unique per run so Redis keys never collide
    work: Path = field(default_factory=lambda: Path("/tmp"))
    profile: bool = False         # py-spy the judged configuration's first worker

    @property
    def dbname(self) -> str:
        return self.url.rsplit("/", 1)[1]


def progress(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def figure(runs: list[float], unit: str, **extra) -> dict:
    """Median of the runs with min and max; the runs are kept for the JSON file."""
    runs = [r for r in runs if r is not None]
    if not runs:
        return {"median": None, "min": None, "max": None, "unit": unit, "runs": [], **extra}
    return {"median": statistics.median(runs), "min": min(runs), "max": max(runs),
            "unit": unit, "runs": runs, **extra}


def ratio(fig: dict | None, ceiling: dict | None) -> float | None:
    if not fig or not ceiling or not fig.get("median") or not ceiling.get("median"):
        return None
    return fig["median"] / ceiling["median"]


def connect(url: str, **kw) -> psycopg.Connection:
    if os.environ.get("JOBFENCE_DATABASE_POOLER") == "transaction":
        # Through PgBouncer (the pooler section): no prepared statements, as the drivers.
        kw.setdefault("prepare_threshold", None)
    return psycopg.connect(url, autocommit=True, **kw)


def scalar(conn: psycopg.Connection, sql: str, params=None):
    row = conn.execute(sql, params).fetchone()
    return row[0] if row else None


def reset(conn: psycopg.Connection) -> None:
    """Every timed run starts from empty tables so earlier runs' rows do not weigh on it.
    CASCADE reaches whatever tables reference jobs.job in the deployed plan."""
    conn.execute("TRUNCATE jobs.job, jobs.event, jobs.metric_minute CASCADE")
    for table in ("plain_job", "plain_event", "plain_metric"):
        if scalar(conn, "SELECT to_regclass(%s) IS NOT NULL", (f"public.{table}",)):
            conn.execute(f"TRUNCATE public.{table}")
    conn.execute("VACUUM ANALYZE jobs.job")
    conn.execute("CHECKPOINT")  # a checkpoint inside a timed run is the noisiest thing there is


def _stat(pid: int | str) -> tuple[str, int] | None:
    """A process's name as /proc shows it (up to its closing parenthesis) and its CPU ticks
    (user + system) so far; None once it has ended."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            head, _, tail = f.read().rpartition(")")
    except OSError:
        return None
    fields = tail.split()
    return head, int(fields[11]) + int(fields[12])


def cpu_ticks(pid: int) -> int:
    """CPU ticks (user + system) of a process so far; 0 once it has ended."""
    stat = _stat(pid)
    return stat[1] if stat else 0


def postgres_ticks() -> dict[int, int]:
    """cpu_ticks of every PostgreSQL process (the postmaster, its backends and helpers), by
    pid. Chosen by executable, not by command line: a client given a postgresql:// URL as an
    argument (pgbench, a driver) is not the server."""
    ticks = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit() and (stat := _stat(entry.name)) and stat[0].endswith("(postgres"):
            ticks[int(entry.name)] = stat[1]
    return ticks


def create_plain_table(conn: psycopg.Connection) -> None:
    # The hand-rolled queue's table: the same columns, defaults, checks and indexes as
    # jobs.job, with no foreign keys, no events, no functions in front of it.
    conn.execute("DROP TABLE IF EXISTS public.plain_job")
    conn.execute("CREATE TABLE public.plain_job (LIKE jobs.job INCLUDING ALL)")
    # The same-writes ceiling's other two tables: the transition log, partitioned by day as
    # jobs.event is (so the rows pay its routing), and the per-minute rollup.
    conn.execute("DROP TABLE IF EXISTS public.plain_event, public.plain_metric")
    conn.execute("CREATE TABLE public.plain_event (LIKE jobs.event INCLUDING ALL) PARTITION BY RANGE (at)")
    conn.execute("CREATE TABLE public.plain_event_now PARTITION OF public.plain_event "
                 "FOR VALUES FROM (now() - interval '1 day') TO (now() + interval '2 days')")
    conn.execute("CREATE TABLE public.plain_event_default PARTITION OF public.plain_event DEFAULT")
    conn.execute("CREATE TABLE public.plain_metric (LIKE jobs.metric_minute INCLUDING ALL)")


class Counters:
    """WAL bytes (cluster-wide, so colleagues' traffic counts too: read the minimum) and
    transactions committed in this database (exact) around a block of runs."""

    def __init__(self, conn: psycopg.Connection, dbname: str):
        self.conn, self.dbname = conn, dbname

    def read(self) -> dict:
        self.conn.execute("SELECT pg_stat_clear_snapshot()")
        lsn = scalar(self.conn, "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')")
        wal = scalar(self.conn, "SELECT wal_bytes FROM pg_stat_wal")
        xact = scalar(self.conn, "SELECT xact_commit + xact_rollback FROM pg_stat_database "
                      "WHERE datname = %s", (self.dbname,))
        return {"lsn": float(lsn), "wal_bytes": float(wal or 0), "xact": int(xact or 0)}

    @staticmethod
    def delta(before: dict, after: dict) -> dict:
        return {k: after[k] - before[k] for k in before}


# -- child processes -------------------------------------------------------------------------
_children: list[subprocess.Popen] = []


def spawn(args: list[str], log: Path, env: dict | None = None, out: Path | None = None) -> subprocess.Popen:
    """A child process logging to `log`; with `out`, its stdout goes there instead (a result
    to parse, kept apart from its progress lines)."""
    fh = open(log, "ab")
    fo = open(out, "wb") if out else None
    proc = subprocess.Popen(args, stdout=fo or fh, stderr=fh if fo else subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, env={**os.environ, **(env or {})}, cwd=ROOT)
    fh.close()
    if fo:
        fo.close()
    _children.append(proc)
    return proc


def stop(proc: subprocess.Popen, grace: float = 10.0) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
    if proc in _children:
        _children.remove(proc)


def stop_all() -> None:
    for proc in list(_children):
        try:
            stop(proc, grace=5.0)
        except Exception:  # noqa: BLE001 — cleaning up after a failure must not fail
            proc.kill()


def peak_rss_mb(pid: int) -> float | None:
    # VmHWM is the process's peak resident set; read it before the process exits.
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def redis_keys(settings) -> list[str]:
    """The run's queue's keys in Redis, under the scratch database's namespace."""
    import psycopg

    from jobfence.transport import delayed_keys, ready_keys

    with psycopg.connect(settings.url, autocommit=True) as conn:
        namespace = conn.execute("SELECT jobs.redis_namespace()").fetchone()[0]
    return ready_keys(settings.queue, namespace) + delayed_keys(settings.queue, namespace)
