"""Per-key concurrency and fair claiming (docs/sql-api.md, "Per-key concurrency and fair
claiming") end to end: however many sessions claim at once, a kind with
max_running_per_key=2 never has more than 2 jobs of one concurrency_key processing (observed
in SQL the whole time); real workers run every job of every key, re-signalling the ones a
key's bound held back; the Python client and the HTTP API carry the key."""

from __future__ import annotations

import threading
import time

import psycopg

from jobfence.db import Database

from api_helpers import start_api
from conftest import E2E_TYPE_OPTIONS, wait_until


class KeyObserver(threading.Thread):
    """The most jobs of one key of the kind processing at once, sampled until stopped."""

    def __init__(self, url: str, kind: str):
        super().__init__(daemon=True)
        self.url, self.kind = url, kind
        self.peak: dict[str | None, int] = {}
        self.samples = 0
        self.done = threading.Event()

    def run(self):
        with psycopg.connect(self.url, autocommit=True) as conn:
            while not self.done.is_set():
                for key, n in conn.execute(
                        "SELECT concurrency_key, count(*) FROM jobs.job WHERE kind = %s "
                        "AND status = 'processing' GROUP BY concurrency_key", (self.kind,)).fetchall():
                    self.peak[key] = max(self.peak.get(key, 0), n)
                self.samples += 1


def test_concurrent_claimers_never_exceed_max_running_per_key(clean_db):
    """claim_many and claim_next from 8 sessions at once; an error (a deadlock, 40P01) fails it."""
    db = Database(clean_db, max_size=1)
    try:
        db.define_type("ck.two", max_running_per_key=2, lease_timeout=30, timeout=60)
        specs = [{"kind": "ck.two", "concurrency_key": f"tenant:{n % 3}"} for n in range(60)]
        ids = [j.id for j in db.submit_many(specs + [{"kind": "ck.two"}] * 10)]
    finally:
        db.close()
    observer = KeyObserver(clean_db, "ck.two")
    observer.start()
    errors: list[BaseException] = []

    def claimer(n: int):
        try:
            with psycopg.connect(clean_db, autocommit=True) as conn:
                deadline = time.monotonic() + 60
                while time.monotonic() < deadline:
                    left = conn.execute("SELECT count(*) FROM jobs.job WHERE kind = 'ck.two' "
                                        "AND status <> 'done'").fetchone()[0]
                    if not left:
                        return
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
        assert conn.execute("SELECT count(*) FROM jobs.job WHERE kind = 'ck.two' AND status = 'done'"
                            ).fetchone()[0] == len(ids)
    assert observer.samples > 10
    keyed = {k: v for k, v in observer.peak.items() if k is not None}
    assert keyed and max(keyed.values()) <= 2, f"per-key peaks {keyed}: the bound is 2"


def test_workers_respect_max_running_per_key_and_run_every_key(procs, declared, client):
    db = Database(procs.database_url, max_size=1)
    try:
        db.define_type("sleep", max_running_per_key=2, **E2E_TYPE_OPTIONS)
    finally:
        db.close()
    observer = KeyObserver(procs.database_url, "sleep")
    observer.start()
    ids = [client.submit("sleep", {"seconds": 0.2}, concurrency_key=f"tenant:{n % 3}")
           for n in range(18)]
    assert {client.get(i).concurrency_key for i in ids} == {"tenant:0", "tenant:1", "tenant:2"}
    for name in ("w1", "w2"):
        procs.worker(name, "--no-declare", "--concurrency", "8", "--batch", "10")
    try:
        wait_until(lambda: {client.get(i).status for i in ids} == {"done"}, 60,
                   what="every job of every key done")
    finally:
        observer.done.set()
        observer.join(10)
    # 16 handler slots and 6 jobs per key: only the bound kept a key at 2.
    assert max(observer.peak.values()) == 2, observer.peak


def test_http_api_takes_a_concurrency_key(procs, declared):
    api = start_api(procs)
    made = api.post("/jobs", {"kind": "noop", "concurrency_key": "customer:7"})
    assert made.status == 202, made.raw
    assert api.get(f"/jobs/{made.data['id']}").data["concurrency_key"] == "customer:7"
    batch = api.post("/jobs/batch", {"jobs": [{"kind": "noop", "concurrency_key": "customer:8"}]})
    assert batch.status == 202, batch.raw
    for bad in ("", "k" * 201, 7):
        refused = api.post("/jobs", {"kind": "noop", "concurrency_key": bad})
        assert refused.status == 400, (bad, refused.raw)


def test_a_worker_fed_by_redis_claims_the_keys_in_turn(procs, declared, client):
    """2,000 jobs of a noisy key are signalled before 10 of a quiet one: popped in that order,
    a claim by id would reach the quiet key's jobs after the 2,000th. The worker claims with
    the popped ids as tokens (jobs.claim_next), so the quiet key's jobs are among the first
    claims, and gives the signals of the noisy jobs passed over back: with no reaper to
    re-signal anything, every job still finishes."""
    noisy = client.submit_many([{"kind": "noop", "concurrency_key": "noisy"}] * 2000)
    quiet = client.submit_many([{"kind": "noop", "concurrency_key": "quiet"}] * 10)
    procs.worker("fair", "--no-declare", "--concurrency", "16", "--batch", "50")
    with psycopg.connect(procs.database_url, autocommit=True) as conn:
        def left():
            return conn.execute("SELECT count(*) FROM jobs.job WHERE status <> 'done'").fetchone()[0]

        wait_until(lambda: left() == 0, 120, what="every job of both keys done")
        order = [r[0] for r in conn.execute(
            # Claim order: a claim read from its job row has an id of its job's, so by time.
            "SELECT job_id FROM jobs.history WHERE reason = 'claimed' ORDER BY at, id").fetchall()]
    assert sorted(order) == sorted(noisy + quiet), "each job claimed exactly once"
    rank = {job_id: n for n, job_id in enumerate(order)}
    last_quiet = max(rank[i] for i in quiet)
    # Within two batches of 50; claimed in push order it would be the 2,010th claim.
    assert last_quiet < 100, f"the quiet key's last job was claim number {last_quiet + 1}"
