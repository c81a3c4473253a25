"""One supervisor of jobfence processes, for ``jobfence run`` and the chaos runner alike:
real ``python -m jobfence ...`` children (the same processes an operator would run one by
one), each restarted after it dies — by a fault, or by itself (the example ``crash`` kind
kills its own worker) — and all stopped together at the end.

Children live in their own session, so a Ctrl-C reaches each once, through the supervisor,
and Linux ends them if the supervisor itself is killed outright (PR_SET_PDEATHSIG).
"""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

from . import log as jlog

logger = logging.getLogger("jobfence.run")


def die_with_parent() -> None:
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError as exc:
        logger.debug("parent-death signal unavailable (%s); children outlive a killed supervisor", exc)


@dataclass
class Child:
    name: str
    # The command, or a function of the generation (1 for the first start) giving it: the
    # chaos workers take a fresh --name per restart.
    argv: list[str] | Callable[[int], list[str]]
    env: dict = field(default_factory=dict)  # over the supervisor's environment
    role: str = ""
    log_path: Path | None = None             # stdout and stderr go there; None: inherited
    proc: subprocess.Popen | None = None
    generation: int = 0
    restarts: int = 0                        # in a row, for the backoff
    next_start: float = 0.0
    started_at: float = 0.0
    exits: list[tuple[float, int]] = field(default_factory=list)   # (Unix time, code)
    restarted_at: list[float] = field(default_factory=list)

    def command(self) -> list[str]:
        return self.argv(self.generation) if callable(self.argv) else list(self.argv)


def backoff_restart(child: Child, now: float) -> float:
    """Seconds to wait before starting ``child`` again: 0.5 s doubling to 10 s, reset for a
    child that had run 30 s before dying (a crash loop must not spin)."""
    if now - child.started_at > 30:
        child.restarts = 0
    delay = min(10.0, 0.5 * 2 ** child.restarts)
    child.restarts += 1
    return delay


class Supervisor:
    def __init__(self, children: Iterable[Child] = (), *, env: dict | None = None,
                 grace: float = 30.0,
                 restart_delay: Callable[[Child, float], float] = backoff_restart,
                 poll: float = 0.2, log: logging.Logger = logger):
        self.children: dict[str, Child] = {}
        for child in children:
            self.add(child)
        self.env = env
        self.grace = grace
        self.restart_delay = restart_delay
        self.poll = poll
        self.log = log
        # Held while a child is (re)started or signalled: a fault aimed at a process must
        # not hit the pid of one that has just been replaced.
        self.lock = threading.Lock()
        self._stop = threading.Event()
        self._watcher = threading.Thread(target=self._watch, name="supervisor", daemon=True)

    def add(self, child: Child) -> Child:
        self.children[child.name] = child
        return child

    # -- starting and watching ----------------------------------------------------------
    def _start(self, child: Child) -> None:
        child.generation += 1
        env = None
        if self.env is not None or child.env:
            env = dict(os.environ if self.env is None else self.env, **child.env)
        out = open(child.log_path, "a") if child.log_path is not None else None
        try:
            child.proc = subprocess.Popen(child.command(), env=env, start_new_session=True,
                                          preexec_fn=die_with_parent, stdout=out,
                                          stderr=subprocess.STDOUT if out else None)
        finally:
            if out is not None:
                out.close()
        child.started_at = time.monotonic()
        jlog.event(self.log, logging.INFO, "child_started", f"{child.name} started",
                   child=child.name, pid=child.proc.pid)

    def start(self) -> None:
        """Start every child, then watch them from a thread of the supervisor's own."""
        with self.lock:
            for child in self.children.values():
                self._start(child)
        self._watcher.start()

    def _watch(self) -> None:
        while not self._stop.wait(self.poll):
            now = time.monotonic()
            with self.lock:
                for child in self.children.values():
                    if child.proc is None:
                        if now >= child.next_start and not self._stop.is_set():
                            self._start(child)
                            child.restarted_at.append(time.time())
                        continue
                    code = child.proc.poll()
                    if code is None:
                        continue
                    delay = self.restart_delay(child, now)
                    child.exits.append((time.time(), code))
                    jlog.event(self.log, logging.WARNING, "child_exited",
                               f"{child.name} exited with {code}; restarting in {delay:.1f}s",
                               child=child.name, pid=child.proc.pid, code=code)
                    child.proc = None
                    child.next_start = now + delay

    def run(self) -> int:
        """``jobfence run``: start, serve until SIGTERM or SIGINT, stop everything, 0."""
        signal.signal(signal.SIGTERM, self.stop)
        signal.signal(signal.SIGINT, self.stop)
        self.start()
        while not self._stop.wait(0.5):
            pass
        return self.stop_all()

    def stop(self, *_args) -> None:
        self._stop.set()

    # -- acting on one child --------------------------------------------------------------
    def role(self, role: str) -> list[Child]:
        return [c for c in self.children.values() if c.role == role]

    def pid(self, name: str) -> int | None:
        proc = self.children[name].proc
        return proc.pid if proc is not None and proc.poll() is None else None

    def send(self, name: str, sig: int) -> int | None:
        """Signal the child's current process; its pid, or None when it is not running."""
        with self.lock:
            pid = self.pid(name)
            if pid is not None:
                os.kill(pid, sig)
            return pid

    # -- stopping -------------------------------------------------------------------------
    def stop_all(self, grace: float | None = None) -> int:
        self._stop.set()
        if self._watcher.is_alive():
            self._watcher.join(5)
        running = [c for c in self.children.values() if c.proc is not None and c.proc.poll() is None]
        jlog.event(self.log, logging.INFO, "stopping", f"stopping {len(running)} process(es)")
        for child in running:
            # SIGCONT first: a stopped child cannot act on SIGTERM.
            for sig in (signal.SIGCONT, signal.SIGTERM):
                try:
                    os.kill(child.proc.pid, sig)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + (self.grace + 5 if grace is None else grace)
        for child in running:
            try:
                child.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                jlog.event(self.log, logging.WARNING, "child_killed",
                           f"{child.name} did not stop in time; killed", child=child.name)
                child.proc.kill()
                child.proc.wait()
        jlog.event(self.log, logging.INFO, "stopped", "all processes stopped")
        return 0
