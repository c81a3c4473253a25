"""The jobfence processes of a run: real ``python -m jobfence ...`` children (workers, reaper,
relay, API), each logging JSON lines to its own file, restarted soon after they die — by a
fault or by themselves — and all stopped at the end (SIGCONT first: a stopped child cannot
act on SIGTERM)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ..runner import _die_with_parent

RESTART_DELAY = 0.3


@dataclass
class Member:
    name: str
    role: str
    argv: Callable[[int], list[str]]      # generation -> argv (workers get a fresh name)
    env: dict
    log_path: Path
    proc: subprocess.Popen | None = None
    generation: int = 0
    exits: list[tuple[float, int]] = field(default_factory=list)
    down_since: float | None = None
    restarted_at: list[float] = field(default_factory=list)


class Supervisor:
    def __init__(self, workdir: Path):
        self.workdir = workdir
        self.members: dict[str, Member] = {}
        self.lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="chaos-supervisor", daemon=True)

    def add(self, name: str, role: str, argv: Callable[[int], list[str]], env: dict) -> Member:
        member = Member(name, role, argv, env, self.workdir / f"{name}.log")
        self.members[name] = member
        return member

    def _spawn(self, m: Member) -> None:
        m.generation += 1
        log = open(m.log_path, "a")
        try:
            m.proc = subprocess.Popen([sys.executable, "-m", "jobfence", "--log-format", "json",
                                       *m.argv(m.generation)],
                                      env=m.env, stdout=log, stderr=subprocess.STDOUT,
                                      start_new_session=True, preexec_fn=_die_with_parent)
        finally:
            log.close()
        m.down_since = None

    def start(self) -> None:
        for m in self.members.values():
            self._spawn(m)
        self._thread.start()

    def _watch(self) -> None:
        while not self._stop.wait(0.05):
            now = time.monotonic()
            with self.lock:
                for m in self.members.values():
                    if m.proc is None or m.proc.poll() is None:
                        continue
                    if m.down_since is None:
                        m.down_since = now
                        m.exits.append((time.time(), m.proc.returncode))
                    elif now - m.down_since >= RESTART_DELAY:
                        self._spawn(m)
                        m.restarted_at.append(time.time())

    def role(self, role: str) -> list[Member]:
        return [m for m in self.members.values() if m.role == role]

    def kill9(self, name: str) -> int | None:
        with self.lock:
            m = self.members[name]
            if m.proc is None or m.proc.poll() is not None:
                return None
            pid = m.proc.pid
            os.kill(pid, signal.SIGKILL)
            return pid

    def send(self, name: str, sig: int) -> None:
        m = self.members[name]
        if m.proc is not None and m.proc.poll() is None:
            os.kill(m.proc.pid, sig)

    def pid(self, name: str) -> int | None:
        m = self.members[name]
        return m.proc.pid if m.proc is not None and m.proc.poll() is None else None

    def worker_name(self, name: str) -> str:
        """The --name the member's current generation runs with (its owned_by)."""
        return f"{name}.g{self.members[name].generation}"

    def events(self, event: str) -> list[dict]:
        """Log lines of every child with this ``event`` (JSON lines only)."""
        found = []
        for m in self.members.values():
            try:
                with open(m.log_path) as f:
                    for line in f:
                        if f'"{event}"' not in line:
                            continue
                        try:
                            row = json.loads(line)
                        except json.JSONDecodeError:
                            continue
                        if row.get("event") == event:
                            row["member"] = m.name
                            found.append(row)
            except OSError:
                pass
        return found

    def stop_all(self, grace: float = 5.0) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(2)
        running = [m for m in self.members.values() if m.proc is not None and m.proc.poll() is None]
        for m in running:
            for sig in (signal.SIGCONT, signal.SIGTERM):
                try:
                    os.kill(m.proc.pid, sig)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + grace
        for m in running:
            try:
                m.proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                m.proc.kill()
                m.proc.wait(5)
