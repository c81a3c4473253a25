"""What the four peer drivers share: their command line, their consumer processes (started,
watched, measured from /proc and stopped), the wait for the last job, and the one JSON line
each prints. Runs under the peers' own virtualenv (bench/.venv-peers), never jobfence's."""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SETUP_HINT = ("run it with bench/.venv-peers/bin/python (bench/run --peers creates that "
              "virtualenv from bench/peers/requirements.txt)")


def need(module: str):
    """Import a peer's package, or say in one line where it lives (no traceback)."""
    import importlib
    try:
        return importlib.import_module(module)
    except ImportError:
        sys.exit(f"peers: {module} is not installed in {sys.executable}: {SETUP_HINT}")


def progress(system: str, msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {system}: {msg}", file=sys.stderr, flush=True)


def arguments(system: str, **defaults) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog=f"{system}_run.py")
    ap.add_argument("role", nargs="?", default="run", choices=("run", "consume"),
                    help="run: the whole measurement (default); consume: one consumer process")
    ap.add_argument("--jobs", type=int, default=20_000)
    ap.add_argument("--per-call", type=int, default=defaults.get("per_call", 1000),
                    help="jobs per enqueue call (or Redis pipeline)")
    ap.add_argument("--processes", type=int, default=defaults.get("processes", 2),
                    help="consumer processes")
    ap.add_argument("--concurrency", type=int, default=defaults.get("concurrency", 1),
                    help="per consumer process: what the peer calls concurrency")
    ap.add_argument("--batch", type=int, default=defaults.get("batch", 1),
                    help="jobs fetched per dequeue, where the peer has such a setting")
    ap.add_argument("--dsn", default=os.environ.get("PEER_DSN"), help="PostgreSQL peers: a scratch database")
    ap.add_argument("--redis-url", default=os.environ.get("PEER_REDIS_URL"),
                    help="Redis peers: the server and database (their keys go under --redis-prefix)")
    ap.add_argument("--redis-prefix", default=os.environ.get("PEER_REDIS_PREFIX", f"jfpeers_{os.getpid()}"),
                    help="Redis peers: every key they write starts with it, and is deleted at the end")
    ap.add_argument("--work", default=None, help="directory for consumer logs and marker files")
    ap.add_argument("--timeout", type=float, default=None, help="seconds for the run (default: from --jobs)")
    for name, value in defaults.items():
        if name in ("per_call", "processes", "concurrency", "batch"):
            continue
        if isinstance(value, bool):
            ap.add_argument(f"--{name.replace('_', '-')}", action="store_true", default=value)
        else:
            ap.add_argument(f"--{name.replace('_', '-')}", default=value, type=type(value))
    args = ap.parse_args()
    args.work = Path(args.work or f"/tmp/jobfence_peers_{system}_{os.getpid()}")
    args.work.mkdir(parents=True, exist_ok=True)
    if args.timeout is None:
        args.timeout = max(300.0, args.jobs / 50)  # the slowest peer here did ~200 jobs/s
    return args


def on_signals() -> None:
    """SIGTERM (the bench stopping this driver) unwinds like Ctrl-C, so the finally blocks stop
    the consumers and leave no keys or rows behind."""
    def handler(signum, frame):
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        raise KeyboardInterrupt(f"signal {signum}")
    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)


def _die_with_parent() -> None:
    # A consumer whose driver was killed outright (SIGKILL, OOM) must not outlive it.
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


class Consumers:
    """The consumer processes of one run: each is `argv`, logging to the work directory."""

    def __init__(self, system: str, work: Path):
        self.system, self.work = system, work
        self.procs: list[subprocess.Popen] = []

    def start(self, argv: list[str], n: int, env: dict | None = None) -> None:
        for i in range(n):
            log = open(self.work / f"{self.system}-consumer{i}.log", "ab")
            self.procs.append(subprocess.Popen(
                argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env={**os.environ, "PYTHONPATH": str(HERE), **(env or {})},
                cwd=HERE, preexec_fn=_die_with_parent))
            log.close()

    def check(self) -> None:
        for i, p in enumerate(self.procs):
            if p.poll() is not None:
                raise RuntimeError(f"{self.system} consumer {i} exited with {p.returncode}:\n"
                                   + self.tail(i))

    def tail(self, i: int, lines: int = 12) -> str:
        try:
            text = (self.work / f"{self.system}-consumer{i}.log").read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def pids(self) -> list[int]:
        """Every process of the consumers' trees (a prefork pool's children included)."""
        out, todo = [], [p.pid for p in self.procs if p.poll() is None]
        while todo:
            pid = todo.pop()
            out.append(pid)
            try:
                children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
            except OSError:
                continue
            todo += [int(c) for c in children]
        return out

    def cpu_seconds(self) -> float:
        hz, total = os.sysconf("SC_CLK_TCK"), 0
        for pid in self.pids():
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            total += int(fields[11]) + int(fields[12])
        return total / hz

    def peak_rss(self) -> dict:
        """VmHWM (peak resident set) of each process of the trees; read before they stop."""
        mb = []
        for pid in self.pids():
            try:
                for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                    if line.startswith("VmHWM:"):
                        mb.append(int(line.split()[1]) / 1024)
            except OSError:
                continue
        return {"processes": len(mb), "max_mb": max(mb, default=None), "total_mb": sum(mb) or None}

    def stop(self, grace: float = 10.0) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + grace
        for p in self.procs:
            try:
                p.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(5)
        self.procs.clear()


def forget_redis(conn, prefix: str) -> None:
    """Delete the run's keys, and no one else's: the database may be shared."""
    keys = list(conn.scan_iter(match=f"{prefix}*", count=1000))
    for start in range(0, len(keys), 1000):
        conn.delete(*keys[start:start + 1000])


def mark_ready(work: Path) -> None:
    """A consumer says it is set up (connected, handlers registered)."""
    (work / f"ready-{os.getpid()}").touch()


def wait_ready(consumers: Consumers, n: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while len(list(consumers.work.glob("ready-*"))) < n:
        consumers.check()
        if time.monotonic() > deadline:
            raise RuntimeError(f"{consumers.system}: consumers not ready within {timeout:.0f} s:\n"
                               + consumers.tail(0))
        time.sleep(0.05)


class _Watch:
    """The rules of a wait for the last job, checked once per poll: the consumers still
    alive, the count never going down, progress within `stall` seconds, all within `timeout`."""

    def __init__(self, what: str, target: int, consumers: Consumers, timeout: float, stall: float):
        self.what, self.target, self.consumers = what, target, consumers
        self.timeout, self.stall = timeout, stall
        self.deadline = time.monotonic() + timeout
        self.last, self.moved = -1, time.monotonic()

    def check(self, n: int) -> None:
        self.consumers.check()
        now = time.monotonic()
        if n < self.last:
            raise RuntimeError(f"{self.consumers.system}: {self.what}: the count of done went from {self.last:,} "
                               f"down to {n:,}: its records were deleted under the run (FLUSHDB by another "
                               "user of this Redis database? JOBFENCE_BENCH_PEERS_REDIS_URL picks another)")
        if n != self.last:
            self.last, self.moved = n, now
        if now > self.deadline or now - self.moved > self.stall:
            raise RuntimeError(f"{self.consumers.system}: {self.what}: {n:,} of {self.target:,} done, "
                               + ("no progress for {:.0f} s".format(now - self.moved) if now <= self.deadline
                                  else f"not all within {self.timeout:.0f} s"))


def wait_for(what: str, count, target: int, consumers: Consumers, timeout: float, stall: float = 60,
             every: float = 0.2) -> None:
    """Poll `count()` until it reaches `target`. The figures come from the peer's records, not
    from this loop, so polling gently only delays the end of the run, never moves a figure. A
    count that stops moving for `stall` seconds ends the run early: those jobs are not coming."""
    watch = _Watch(what, target, consumers, timeout, stall)
    while (n := count()) < target:
        watch.check(n)
        time.sleep(every)


async def wait_for_async(what: str, count, target: int, consumers: Consumers, timeout: float,
                         stall: float = 60, every: float = 0.2) -> None:
    """`wait_for` for the asyncio peers: `count` is a coroutine function."""
    import asyncio
    watch = _Watch(what, target, consumers, timeout, stall)
    while (n := await count()) < target:
        watch.check(n)
        await asyncio.sleep(every)


class Stamps:
    """Completion records the Redis peers' consumers write themselves (Celery keeps none
    without a result backend): one `submitted finished` line of epoch seconds per job, a
    file per consumer process, flushed every FLUSH_S by a thread of its own."""

    FLUSH_S = 0.1

    def __init__(self, work: Path):
        self.path = work / f"done-{os.getpid()}.txt"
        self.file = open(self.path, "a", buffering=1 << 16)
        import threading
        self.lock = threading.Lock()
        threading.Thread(target=self._flush, daemon=True).start()

    def add(self, submitted: float, finished: float) -> None:
        with self.lock:
            self.file.write(f"{submitted!r} {finished!r}\n")

    def _flush(self) -> None:
        while True:
            time.sleep(self.FLUSH_S)
            with self.lock:
                self.file.flush()

    @staticmethod
    def count(work: Path, seen: dict) -> int:
        """Lines written so far, reading only what was added since the last call."""
        for path in work.glob("done-*.txt"):
            offset, lines = seen.get(path, (0, 0))
            with open(path, "rb") as f:
                f.seek(offset)
                chunk = f.read()
            end = chunk.rfind(b"\n") + 1  # a line is counted once it is whole
            seen[path] = (offset + end, lines + chunk[:end].count(b"\n"))
        return sum(lines for _, lines in seen.values())

    @staticmethod
    def pairs(work: Path) -> list[tuple[float, float]]:
        out = []
        for path in work.glob("done-*.txt"):
            for line in path.read_text().splitlines():
                submitted, finished = line.split()
                out.append((float(submitted), float(finished)))
        return out


def quantile(sorted_values: list[float], q: float) -> float | None:
    """Linear interpolation between the closest ranks, as PostgreSQL's percentile_cont (which
    the bench uses for jobfence's rows)."""
    if not sorted_values:
        return None
    pos = q * (len(sorted_values) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def figures(system: str, version: str, args, config: dict, pairs: list[tuple[float, float]],
            wall: float, submit_s: float, cpu_s: float, rss: dict, source: str) -> dict:
    """One run's figures from the peer's records: `pairs` are (submitted, finished) epoch
    seconds of every measured job."""
    if len(pairs) != args.jobs:
        raise RuntimeError(f"{system}: {len(pairs)} completion records for {args.jobs} jobs")
    first = min(s for s, _ in pairs)
    last = max(f for _, f in pairs)
    lat = sorted((f - s) * 1000 for s, f in pairs)
    return {"system": system, "version": version, "jobs": args.jobs, "config": config,
            "jobs_per_s": args.jobs / (last - first), "measured_from": source,
            "span_s": last - first, "wall_jobs_per_s": args.jobs / wall,
            "submit_per_s": args.jobs / submit_s,
            "latency_ms": {"p50": quantile(lat, 0.5), "p99": quantile(lat, 0.99), "max": lat[-1]},
            "consumer_cpu_us_per_job": cpu_s / args.jobs * 1e6, "rss": rss}


def emit(result: dict) -> None:
    print(json.dumps(result), flush=True)


def produce_and_report(system: str, produce, errors: tuple = ()) -> None:
    """How every driver's producer side ends: its figures as one JSON line; a signal, exit 130;
    a wrong URL or a server away (RuntimeError, OSError or one of the peer's `errors`), one
    line instead of a traceback."""
    on_signals()
    try:
        emit(produce())
    except KeyboardInterrupt:
        sys.exit(130)
    except (RuntimeError, OSError, *errors) as exc:
        sys.exit(str(exc) if isinstance(exc, RuntimeError) else f"{system}: {type(exc).__name__}: {exc}")
