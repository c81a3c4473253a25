"""The end-to-end suite's core cases as one workload, run through every topology of
docs/scaling.md (PgBouncer, Redis Sentinel, Redis Cluster): a batch, a retried job, a
delayed job, a fan-out with its coordinator, five jobs of one ordering key, a SQL producer
heard by the relay, and a job whose worker is killed mid-run so the reaper takes its lease
back. ``run`` starts the reaper, relay and workers and checks every promise at the end."""

from __future__ import annotations

import signal
from datetime import datetime, timedelta, timezone

import psycopg

from conftest import wait_until


def run(procs, client, *, sql_url: str, audit_url: str, batch: int = 300, before_workers=None,
        what: str = "every job done") -> list[int]:
    """Submit the workload through ``client`` (and one job through ``sql_url``), run it, check
    it; returns the ids. ``before_workers`` is called once everything is submitted and
    running workers are about to start (e.g. to inject a failover)."""
    ids = client.submit_many([{"kind": "noop", "payload": {"i": i}} for i in range(batch)])
    retried = client.submit("flaky", {"fail_times": 2})
    delayed = client.submit("noop", {"late": True},
                            run_after=datetime.now(timezone.utc) + timedelta(seconds=1))
    coordinator = client.fan_out([{"kind": "noop"} for _ in range(5)], {"kind": "noop"})
    ordered = [client.submit("noop", {"n": n}, ordering_key="account-7") for n in range(5)]
    # A SQL producer (notify => true): the relay hears it and pushes the id.
    with psycopg.connect(sql_url, autocommit=True, prepare_threshold=None) as c:
        from_sql = c.execute("SELECT (jobs.submit('noop', '{\"sql\": true}')).id").fetchone()[0]
    procs.reaper()
    relay = procs.start("relay", "relay", "--stale-after", "0.5")
    relay.wait_for("relay_listening")
    # Reaped: its worker is killed mid-job; the reaper takes the lease back and another
    # worker finishes it.
    doomed = procs.worker("doomed", "--concurrency", "1")
    reaped = client.submit("sleep", {"seconds": 1.5})
    wait_until(lambda: client.get(reaped).status == "processing", 20, what="sleep claimed")
    doomed.proc.send_signal(signal.SIGKILL)
    if before_workers is not None:
        before_workers()
    for name in ("w1", "w2"):
        procs.worker(name, "--batch", "50")
    ids += [retried, delayed, coordinator, from_sql, reaped] + ordered
    wait_until(lambda: client.status_counts(ids).get("done", 0) == len(ids), 90, what=what)

    # Two failed attempts, then success: retried by its worker, or (when a fault took the
    # worker's lease meanwhile) reaped — either way two attempts counted, none lost.
    reasons = [e.reason for e in client.events(retried)]
    assert client.get(retried).retry_count == 2 and reasons[-1] == "completed", reasons
    assert reasons.count("retried") + reasons.count("reaped") == 2, reasons
    assert "reaped" in [e.reason for e in client.events(reaped)]
    assert client.get(delayed).claimed_at >= client.get(delayed).run_after
    children = client.children(coordinator)
    assert max(c.finished_at for c in children) <= client.get(coordinator).claimed_at
    finished = [client.get(i).finished_at for i in ordered]
    assert finished == sorted(finished), "one ordering key runs in id order"
    with psycopg.connect(audit_url, autocommit=True) as c:
        assert c.execute("SELECT count(*) FROM jobs.audit() WHERE violations > 0").fetchone()[0] == 0
    return ids
