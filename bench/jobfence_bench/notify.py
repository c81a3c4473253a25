"""What NOTIFY costs many writers (issue 29): 1, 8, 32 and 64 concurrent producers, each
calling ``jobs.submit`` for one job per transaction (pgbench, one client per producer), with
notify on, off, and with the relay reading new jobs from the table (``jobs.configure_relay
('table')``: submits send no notification, and `jobfence relay` polls ``jobs.poll_submitted``).
A listener drains the notifications throughout, as the relay would, so that a notifying commit
pays what it pays in production; in the table mode a reader calls jobs.poll_submitted every
10 ms, as the relay does. PostgreSQL serialises notifying commits on one lock, so the
cost grows with the writers; the table mode takes it away."""

from __future__ import annotations

import threading

import psycopg

from . import ceilings
from .common import Settings, figure, progress, reset

PRODUCERS = (1, 8, 32, 64)
MODES = ("notify", "no_notify", "table")


def _script(notify: bool) -> str:
    return ("SELECT id FROM jobs.submit(kind => 'bench', payload => '{\"n\": 1}', "
            f"notify => {'true' if notify else 'false'});\n")


class _Listener:
    """LISTEN on jobs_submitted and throw the notifications away, until stopped."""

    def __init__(self, url: str):
        self.conn = psycopg.connect(url, autocommit=True)
        self.conn.execute("LISTEN jobs_submitted")
        self.stop = threading.Event()
        self.received = 0
        self.thread = threading.Thread(target=self._drain, daemon=True)
        self.thread.start()

    def _drain(self) -> None:
        while not self.stop.is_set():
            self.received += sum(1 for _ in self.conn.notifies(timeout=0.2, stop_after=10_000))

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=5)
        self.conn.close()


class _Reader:
    """What `jobfence relay` does while submits do not notify: jobs.poll_submitted every
    10 ms (its --table-poll), so the table mode's figure pays for its reading."""

    def __init__(self, url: str):
        self.conn = psycopg.connect(url, autocommit=True)
        self.stop = threading.Event()
        self.read = 0
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        while not self.stop.wait(0.01):
            self.read += len(self.conn.execute("SELECT job_id FROM jobs.poll_submitted()").fetchall())

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=5)
        self.conn.close()


def run(settings: Settings, admin) -> dict:
    """Submits/s per mode and producer count (median of the runs), and each mode's ratio to
    notify off at the same count."""
    paths = {}
    for mode in MODES:
        paths[mode] = settings.work / f"notify_{mode}.sql"
        paths[mode].write_text(_script(mode == "notify" or mode == "table"))
    listener = _Listener(settings.url)
    out: dict = {"producers": {}}
    try:
        for producers in PRODUCERS:
            rates: dict[str, list[float]] = {m: [] for m in MODES}
            for rep in range(settings.reps):
                for mode in MODES:  # alternating, so drift falls on every mode alike
                    reset(admin)
                    admin.execute("SELECT jobs.configure_relay(source => %s)",
                                  ("table" if mode == "table" else "notify",))
                    reader = _Reader(settings.url) if mode == "table" else None
                    try:
                        rates[mode].append(ceilings.pgbench(settings, paths[mode], clients=producers)["tps"])
                    finally:
                        if reader:
                            reader.close()
                    progress(f"notify: {producers} producers, {mode}: run {rep + 1}/{settings.reps}: "
                             f"{rates[mode][-1]:,.0f} submits/s")
            row = {m: figure(r, "submits/s") for m, r in rates.items()}
            off = row["no_notify"]["median"]
            row["ratio"] = row["notify"]["median"] / off
            row["table_ratio"] = row["table"]["median"] / off
            out["producers"][str(producers)] = row
    finally:
        admin.execute("SELECT jobs.configure_relay(source => 'notify')")
        listener.close()
        reset(admin)
    out["notifications_received"] = listener.received
    return out
