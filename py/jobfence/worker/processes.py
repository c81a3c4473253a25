"""The process executor: handlers of ``@app.task(..., executor="process")`` kinds run in
child processes (``python -m jobfence.worker.child``), one job at a time per child.

Unlike a thread, a child can be stopped whatever its handler does: at the job's timeout,
a cancel request, a lost lease or the end of the shutdown grace the worker kills it
(SIGKILL), reports the job and starts a fresh child for the next one.
"""

from __future__ import annotations

import importlib
import logging
import queue as queue_mod
import socket
import subprocess
import sys
import threading
import time
from multiprocessing.connection import Connection

from ..app import Task
from ..errors import JobfenceError
from .common import RUNNING, Host, Job, event
from .executor import Outcomes

POLL_SECONDS = 0.05
# A child imports the app before it says it is ready; past this it is deemed broken.
READY_SECONDS = 60.0


def handler_ref(task: Task) -> tuple[str, str]:
    """(module, qualified name) by which a child imports the handler; refused at start when
    the name does not lead back to the same function."""
    fn = task.handler
    module, qualname = getattr(fn, "__module__", None), getattr(fn, "__qualname__", "")
    found = None
    if module and module != "__main__" and "<" not in qualname:
        try:
            found = importlib.import_module(module)
            for part in qualname.split("."):
                found = getattr(found, part)
        except (ImportError, AttributeError):
            found = None
    if found is not fn:
        raise ValueError(f"kind {task.kind!r} uses executor='process': its handler must be a "
                         f"module-level function importable by name (got {module}.{qualname})")
    return module, qualname


class _Slot:
    def __init__(self, ex: "ProcessExecutor", n: int):
        self.ex = ex
        self.n = n
        self.proc: subprocess.Popen | None = None
        self.conn: Connection | None = None
        self.thread = threading.Thread(target=self._loop, name=f"jobfence-process-{n}",
                                       daemon=True)

    def spawn(self) -> None:
        mine, theirs = socket.socketpair()
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "jobfence.worker.child", str(theirs.fileno()),
                 self.ex.log_format, logging.getLevelName(logging.getLogger().level),
                 self.ex.w.name],
                pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, close_fds=True)
        except BaseException:
            mine.close()
            raise
        finally:
            theirs.close()
        self.conn = Connection(mine.detach())
        # Wait for the child's imports here, not inside the next job's timeout.
        if not self.conn.poll(READY_SECONDS):
            self.kill()
            raise RuntimeError(f"handler process not ready after {READY_SECONDS:.0f}s")
        self.conn.recv()
        event(logging.INFO, "process_ready", "handler process ready", pid=self.proc.pid,
              slot=self.n, worker=self.ex.w.name)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
        if self.proc is not None:
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                event(logging.ERROR, "process_unkillable", "a handler process survived SIGKILL",
                      pid=self.proc.pid, worker=self.ex.w.name)
        if self.conn is not None:
            self.conn.close()
        self.proc, self.conn = None, None

    def _loop(self) -> None:
        outcomes = self.ex.outcomes
        while True:
            job = self.ex.q.get()
            if job is None:
                self.kill()
                return
            if job.taken:
                outcomes.skipped(job)
                continue
            try:
                self._run(job)
            except Exception as exc:  # noqa: BLE001 - the slot must keep serving
                self.kill()
                outcomes.raised(job, RuntimeError(f"process executor: {type(exc).__name__}: {exc}"))

    def _run(self, job: Job) -> None:
        outcomes = self.ex.outcomes
        if self.proc is None or self.proc.poll() is not None:
            self.kill()
            self.spawn()
        module, qualname = self.ex.refs[job.lease.kind]
        job.state = RUNNING
        job.started = time.monotonic()
        self.conn.send((module, qualname, job.lease, self.ex.w.name))
        reply = None
        reason = None
        while True:
            if self.conn.poll(POLL_SECONDS):
                try:
                    reply = self.conn.recv()
                except (EOFError, OSError):
                    reply = None
                if reply is None or reply[0] != "progress":
                    break
                # A report, not the answer: served, then the same checks as a quiet poll,
                # so a handler that reports often is still stopped at its timeout.
                self._progress(job, reply)
                reply = None
            if job.ctx.cancelled():
                reason = job.ctx.cancel_reason
                break
            if self.proc.poll() is not None:
                break
        if reply is not None:
            if reply[0] == "ok":
                outcomes.returned(job, reply[1])
            elif reply[0] == "snooze":
                outcomes.snoozed(job, reply[1])
            else:
                outcomes.failed(job, reply[1], reply[2])
            return
        pid, code = self.proc.pid, self.proc.poll()
        self.kill()
        if reason is not None:
            event(logging.WARNING, "process_killed",
                  f"handler process killed ({reason}); a fresh one serves the next job",
                  pid=pid, reason=reason, **job.fields(self.ex.w.name))
            outcomes.failed(job, "cancelled" if reason == "cancel_requested" else reason,
                            reason != "cancel_requested")
        else:
            error = f"handler process died (exit code {code})"
            event(logging.WARNING, "process_died", error, pid=pid, **job.fields(self.ex.w.name))
            outcomes.failed(job, error, True)
        if not self.ex.stopping:
            # The replacement boots now, so the next job does not wait for it.
            try:
                self.spawn()
            except (OSError, RuntimeError) as exc:
                event(logging.ERROR, "process_spawn_failed", f"cannot start a handler process: "
                      f"{exc}; retrying with the next job", worker=self.ex.w.name)

    def _progress(self, job: Job, report: tuple) -> None:
        """A child's ``ctx.progress`` ("progress", job_id, lease_version, value): the call is
        made here, on the worker's connection, and its answer, or its error, goes back to the
        waiting handler, which handles it as a thread handler would. A cancel (a request the
        call brought, the timeout, shutdown) is answered with its reason, and the loop then
        kills the child; a stopped job makes no more calls."""
        _, job_id, lease_version, value = report
        reason = job.ctx.cancel_reason
        if (job_id, lease_version) != (job.lease.job_id, job.lease.lease_version):
            answer = ("progress_err", RuntimeError, "ctx.progress of a job that has ended", None)
        elif reason is not None:
            answer = ("progress_ok", reason)
        else:
            try:
                job.ctx.progress(value)
                answer = ("progress_ok", job.ctx.cancel_reason)
            except JobfenceError as exc:
                answer = ("progress_err", type(exc), exc.message, exc.hint)
            except Exception as exc:  # noqa: BLE001 - the handler's to handle, as in a thread
                # Sent as a plain builtin: any class rebuilds from a message in the child.
                kind = TypeError if isinstance(exc, TypeError) else ValueError if isinstance(
                    exc, ValueError) else RuntimeError
                answer = ("progress_err", kind, f"{type(exc).__name__}: {exc}", None)
        try:
            self.conn.send(answer)
        except OSError:
            pass  # the child is gone: the loop's next poll reports how it ended


class ProcessExecutor:
    def __init__(self, worker: Host, outcomes: Outcomes, size: int, tasks: list[Task]):
        self.w = worker
        self.outcomes = outcomes
        self.refs = {t.kind: handler_ref(t) for t in tasks}
        self.q: queue_mod.Queue = queue_mod.Queue()
        self.log_format = "json" if any(
            type(h.formatter).__name__ == "_JsonFormatter" for h in logging.getLogger().handlers
        ) else "text"
        self.slots = [_Slot(self, n) for n in range(1, max(1, size) + 1)]
        self.stopping = False

    def start(self) -> None:
        # Children start with their first job: an app whose process kinds are rare (or
        # absent from this worker's queues) pays nothing for them.
        for slot in self.slots:
            slot.thread.start()

    def submit(self, jobs: list[Job]) -> None:
        for job in jobs:
            self.q.put(job)

    def drain(self) -> list[Job]:
        out = []
        while True:
            try:
                job = self.q.get_nowait()
            except queue_mod.Empty:
                return [j for j in out if j is not None]
            out.append(job)

    def stop(self) -> None:
        self.stopping = True
        for _ in self.slots:
            self.q.put(None)
        for slot in self.slots:
            slot.thread.join(2)
            if slot.thread.is_alive():
                slot.kill()
