"""A handler process of the process executor: ``python -m jobfence.worker.child FD FORMAT
LEVEL WORKER``. Reads (module, qualname, lease, worker) from the socket FD, runs the handler,
answers ("ok", result), ("err", error, retryable) or ("snooze", seconds). The worker kills it when the job must
stop; it never talks to PostgreSQL or Redis itself: a ``ctx.progress`` report goes to the
worker as ("progress", value), which makes the call and answers before the handler goes on."""

from __future__ import annotations

import asyncio
import importlib
import inspect
import logging
import pickle
import sys
import threading
from multiprocessing.connection import Connection
from types import SimpleNamespace

from .. import log as jlog
from ..app import Context
from ..errors import JobfenceError, NonRetryable, Snooze


def _resolve(module: str, qualname: str):
    found = importlib.import_module(module)
    for part in qualname.split("."):
        found = getattr(found, part)
    return found


class ParentProgress:
    """``ctx.progress`` in a handler process: the worker, which holds the connection, makes
    the ``jobs.progress`` call and answers. One report at a time (an async handler's reports
    come from threads, ``ctx.aprogress``), and only while its job runs: the lock also orders
    a report against the job's answer, so a report sent by a thread the handler left
    behind cannot be taken for the next job's."""

    def __init__(self, conn: Connection):
        self.conn = conn
        self.lock = threading.Lock()
        self.ctx: Context | None = None

    def start(self, ctx: Context) -> None:
        with self.lock:
            self.ctx = ctx

    def answer(self, reply: tuple) -> None:
        """The job's answer, once no report of it is in flight."""
        with self.lock:
            self.ctx = None
            self.conn.send(reply)

    def __call__(self, lease, value):
        with self.lock:
            ctx = self.ctx
            if ctx is None or ctx.lease is not lease:
                raise RuntimeError("ctx.progress of a job that has ended")
            self.conn.send(("progress", lease.job_id, lease.lease_version, value))
            answer = self.conn.recv()
        if answer[0] == "progress_err":
            _, cls, message, hint = answer
            raise cls(message, hint=hint) if issubclass(cls, JobfenceError) else cls(message)
        if answer[1] is not None:
            ctx._cancel(answer[1])  # its reason (a request, the timeout, shutdown) as given
        return SimpleNamespace(cancel_requested=False)


def main(argv: list[str]) -> int:
    fd, fmt, level, worker = int(argv[0]), argv[1], argv[2], argv[3]
    jlog.setup(fmt, level, role="worker-process", worker=worker)
    conn = Connection(fd)
    conn.send(("ready",))
    handlers: dict[tuple[str, str], object] = {}
    progress = ParentProgress(conn)
    while True:
        try:
            module, qualname, lease, worker = conn.recv()
        except (EOFError, OSError):
            return 0  # the worker is gone or stopping
        ctx = Context(lease, worker, logging.getLogger(f"jobfence.task.{lease.kind}"), progress=progress)
        progress.start(ctx)
        try:
            fn = handlers.get((module, qualname))
            if fn is None:
                fn = handlers[(module, qualname)] = _resolve(module, qualname)
            if inspect.iscoroutinefunction(fn):
                result = asyncio.run(fn(lease.job_id, lease.payload, ctx))
            else:
                result = fn(lease.job_id, lease.payload, ctx)
            reply = ("ok", result)
        except Snooze as exc:
            reply = ("snooze", exc.seconds)
        except NonRetryable as exc:
            reply = ("err", f"{type(exc).__name__}: {exc}"[:2000], False)
        except BaseException as exc:  # noqa: BLE001 - SystemExit too: the job's failure
            reply = ("err", f"{type(exc).__name__}: {exc}".rstrip(": ")[:2000], True)
        try:
            progress.answer(reply)
        except (pickle.PicklingError, TypeError, AttributeError) as exc:
            conn.send(("err", f"result rejected: cannot send it to the worker: {exc}", False))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
