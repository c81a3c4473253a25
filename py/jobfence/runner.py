"""``jobfence run``: relay + reaper + N workers (+ the HTTP API) as child processes of one command.

For a laptop or a demo. Children are real ``python -m jobfence ...`` processes (the same
ones an operator would run separately); a child that dies unexpectedly — the example
``crash`` kind kills its own worker — is restarted with backoff. SIGTERM/SIGINT are passed
on as one SIGTERM each so the workers drain, then the tree exits 0.
"""

from __future__ import annotations

import ctypes
import logging
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field

from . import log as jlog

logger = logging.getLogger("jobfence.run")


def _die_with_parent() -> None:
    # Children live in their own session (a Ctrl-C must reach them once, through us), so
    # ask Linux to end them if this supervisor is killed outright.
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError as exc:
        logger.debug("parent-death signal unavailable (%s); children outlive a killed supervisor", exc)


@dataclass
class Child:
    name: str
    argv: list[str]
    env: dict = field(default_factory=dict)  # over the supervisor's environment
    proc: subprocess.Popen | None = None
    restarts: int = 0
    next_start: float = 0.0
    started_at: float = field(default=0.0)


class Supervisor:
    def __init__(self, children: list[Child], *, env: dict | None = None, grace: float = 30.0):
        self.children = children
        self.env = env
        self.grace = grace
        self._stop = threading.Event()

    def stop(self, *_args) -> None:
        self._stop.set()

    def _start(self, child: Child) -> None:
        env = None
        if self.env is not None or child.env:
            import os

            env = dict(os.environ if self.env is None else self.env, **child.env)
        child.proc = subprocess.Popen(child.argv, env=env, start_new_session=True,
                                      preexec_fn=_die_with_parent)
        child.started_at = time.monotonic()
        jlog.event(logger, logging.INFO, "child_started", f"{child.name} started",
                   child=child.name, pid=child.proc.pid)

    def run(self) -> int:
        signal.signal(signal.SIGTERM, self.stop)
        signal.signal(signal.SIGINT, self.stop)
        for child in self.children:
            self._start(child)
        while not self._stop.wait(0.2):
            now = time.monotonic()
            for child in self.children:
                if child.proc is None:
                    if now >= child.next_start:
                        self._start(child)
                    continue
                code = child.proc.poll()
                if code is None:
                    continue
                # A child that ran a while before dying earns a fresh backoff.
                if now - child.started_at > 30:
                    child.restarts = 0
                delay = min(10.0, 0.5 * 2 ** child.restarts)
                child.restarts += 1
                jlog.event(logger, logging.WARNING, "child_exited",
                           f"{child.name} exited with {code}; restarting in {delay:.1f}s",
                           child=child.name, pid=child.proc.pid, code=code)
                child.proc = None
                child.next_start = now + delay
        return self._stop_all()

    def _stop_all(self) -> int:
        running = [c for c in self.children if c.proc is not None and c.proc.poll() is None]
        jlog.event(logger, logging.INFO, "stopping", f"stopping {len(running)} process(es)")
        for child in running:
            child.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + self.grace + 5
        for child in running:
            try:
                child.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                jlog.event(logger, logging.WARNING, "child_killed",
                           f"{child.name} did not stop in time; killed", child=child.name)
                child.proc.kill()
                child.proc.wait()
        jlog.event(logger, logging.INFO, "stopped", "all processes stopped")
        return 0


def build_children(*, app: str, workers: int, concurrency: int, batch: int | None,
                   log_format: str, log_level: str, reaper_interval: float, stale_after: float,
                   grace: float, queues: list[str], metrics_port: int | None = None,
                   metrics_host: str = "127.0.0.1", api_port: int | None = None,
                   api_host: str = "127.0.0.1", api_no_auth: bool = False,
                   role_urls: dict[str, str] | None = None, declare: bool = True,
                   api_env: dict[str, str] | None = None) -> list[Child]:
    """``role_urls``: role (worker, reaper, relay, api) -> the database URL its children log
    in with, passed as their JOBFENCE_DATABASE_URL. ``api_env``: more environment for the
    API child alone (its admin login)."""
    urls = role_urls or {}

    def login(role: str) -> dict:
        return {"JOBFENCE_DATABASE_URL": urls[role]} if urls.get(role) else {}

    base = [sys.executable, "-m", "jobfence", "--log-format", log_format, "--log-level", log_level]
    qargs = [a for q in queues for a in ("--queue", q)]

    def metrics(offset: int) -> list[str]:
        # One port per child, in a fixed order, so a scrape config can list them; 0 lets
        # every child pick a free one.
        if metrics_port is None:
            return []
        port = metrics_port + offset if metrics_port else 0
        return ["--metrics-port", str(port), "--metrics-host", metrics_host]

    children = [
        Child("relay", base + ["relay", "--app", app, "--poll-interval", str(reaper_interval),
                               "--stale-after", str(stale_after)] + qargs + metrics(0),
              login("relay")),
        Child("reaper", base + ["reaper", "--app", app, "--interval", str(reaper_interval),
                                "--stale-after", str(stale_after)] + qargs + metrics(1),
              login("reaper")),
    ]
    for n in range(1, workers + 1):
        argv = base + ["worker", "--app", app, "--concurrency", str(concurrency),
                       "--grace", str(grace)] + qargs + metrics(1 + n)
        if batch:
            argv += ["--batch", str(batch)]
        if not declare:
            argv.append("--no-declare")
        children.append(Child(f"worker-{n}", argv, login("worker")))
    if api_port is not None:
        # The API serves its own metrics on its port (GET /metrics), so it takes no
        # --metrics-port.
        api_child_env = {**login("api"), **(api_env or {})}
        children.append(Child("api", base + ["api", "--host", api_host, "--port", str(api_port)]
                              + (["--no-auth"] if api_no_auth else []), api_child_env))
    return children
