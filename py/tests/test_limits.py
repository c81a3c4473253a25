"""Global limits per kind, enforced in SQL at claim: however many workers and connections
claim at once, a max_running=3 kind never has more than 3 jobs processing (observed in SQL
the whole time), and the jobs a limit held back are signalled again, so none waits forever
even with no reaper running and the queue busy with other work."""

from __future__ import annotations

import threading
import time

import psycopg

from jobfence.db import Database

from conftest import E2E_TYPE_OPTIONS, wait_until


class Observer(threading.Thread):
    """Counts the kind's processing jobs in SQL, as often as it can, until stopped."""

    def __init__(self, url: str, kind: str):
        super().__init__(daemon=True)
        self.url, self.kind = url, kind
        self.peak = 0
        self.samples = 0
        self.done = threading.Event()

    def run(self):
        with psycopg.connect(self.url, autocommit=True) as conn:
            while not self.done.is_set():
                n = conn.execute("SELECT count(*) FROM jobs.job WHERE kind = %s AND status = 'processing'",
                                 (self.kind,)).fetchone()[0]
                self.peak = max(self.peak, n)
                self.samples += 1


def test_concurrent_claimers_never_exceed_max_running(clean_db):
    """claim_many and claim_next from 8 sessions at once; an error (a deadlock, 40P01) fails it."""
    db = Database(clean_db, max_size=1)
    try:
        db.define_type("li.three", max_running=3, lease_timeout=30, timeout=60)
        ids = [j.id for j in db.submit_many([{"kind": "li.three"}] * 60)]
    finally:
        db.close()
    observer = Observer(clean_db, "li.three")
    observer.start()
    errors: list[BaseException] = []

    def claimer(n: int):
        try:
            with psycopg.connect(clean_db, autocommit=True) as conn:
                deadline = time.monotonic() + 60
                while time.monotonic() < deadline:
                    left = conn.execute("SELECT count(*) FROM jobs.job WHERE kind = 'li.three' "
                                        "AND status <> 'done'").fetchone()[0]
                    if not left:
                        return
                    # Every claimer asks for every id (claim_many) or polls (claim_next): the
                    # limit alone decides, and the two kinds of claim never deadlock.
                    if n % 2:
                        got = conn.execute("SELECT job_id, lease_version FROM jobs.claim_many(%s, %s)",
                                           (ids, f"c{n}")).fetchall()
                    else:
                        got = conn.execute("SELECT job_id, lease_version FROM jobs.claim_next(%s, NULL, 5)",
                                           (f"c{n}",)).fetchall()
                    for job_id, version in got:
                        conn.execute("SELECT jobs.complete(%s, %s, %s, '{}')", (job_id, f"c{n}", version))
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            errors.append(exc)

    threads = [threading.Thread(target=claimer, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(90)
    observer.done.set()
    observer.join(10)
    assert not errors, errors
    with psycopg.connect(clean_db, autocommit=True) as conn:
        assert conn.execute("SELECT count(*) FROM jobs.job WHERE kind = 'li.three' AND status = 'done'"
                            ).fetchone()[0] == len(ids)
    assert observer.samples > 10
    assert observer.peak <= 3, f"{observer.peak} jobs of a max_running=3 kind were processing at once"


def test_workers_respect_max_running_and_held_back_jobs_all_run(procs, declared, client):
    db = Database(procs.database_url, max_size=1)
    try:
        db.define_type("sleep", max_running=3, **E2E_TYPE_OPTIONS)
    finally:
        db.close()
    observer = Observer(procs.database_url, "sleep")
    observer.start()
    limited = client.submit_many([{"kind": "sleep", "payload": {"seconds": 0.2}}] * 24)
    # Unlimited work in the same queue keeps its ready list busy: the reaper's stale sweep
    # (not running here anyway) would not help; held-back jobs must be re-signalled.
    busy = client.submit_many([{"kind": "noop"}] * 200)
    for name in ("w1", "w2", "w3"):
        procs.worker(name, "--no-declare", "--concurrency", "8", "--batch", "10")
    try:
        wait_until(lambda: {client.get(i).status for i in limited + busy} == {"done"}, 60,
                   what="every limited and unlimited job done")
    finally:
        observer.done.set()
        observer.join(10)
    assert observer.peak == 3, f"peak {observer.peak}: the limit is 3 and 24 jobs waited"


def test_rate_limit_spreads_claims(procs, declared, client, conn):
    db = Database(procs.database_url, max_size=1)
    try:
        db.define_type("noop", rate_limit=5, rate_period=1.0, **E2E_TYPE_OPTIONS)
    finally:
        db.close()
    ids = client.submit_many([{"kind": "noop"}] * 15)
    procs.worker("w1", "--no-declare", "--concurrency", "8")
    wait_until(lambda: {client.get(i).status for i in ids} == {"done"}, 30, what="all done")
    # The server's own clock: a bucket of 5 refilled at 5 per second lets at most
    # 5 + 5 * t claims through in the first t seconds.
    stamps = [row[0] for row in conn.execute(
        "SELECT extract(epoch FROM claimed_at) FROM jobs.job WHERE id = ANY (%s) ORDER BY claimed_at",
        (ids,)).fetchall()]
    first = float(stamps[0])
    for n, at in enumerate(stamps, start=1):
        assert n <= 5 + 5 * (float(at) - first) + 1, f"claim {n} came {float(at) - first:.2f}s in"
