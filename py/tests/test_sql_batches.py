"""The batched lease calls under a second session: heartbeat_many never waits on a row lock
held elsewhere, and the one exit from processing stays correct when a worker and the
reaper race for the same expired lease."""

from __future__ import annotations

import threading

import psycopg

from conftest import wait_until


def _claimed(conn, n, lease="15 seconds"):
    conn.execute("SELECT jobs.define_type('hb', lease_timeout => %s)", (lease,))
    ids = [r[0] for r in conn.execute(
        "SELECT id FROM jobs.submit_many((SELECT jsonb_agg(jsonb_build_object('kind', 'hb', 'notify', false))"
        " FROM generate_series(1, %s)))", (n,))]
    leases = conn.execute("SELECT job_id, lease_version FROM jobs.claim_many(%s, 'w1')", (ids,)).fetchall()
    return [tuple(lease) for lease in leases]


def test_heartbeat_many_skips_a_row_locked_elsewhere_and_refreshes_the_rest(conn, clean_db):
    leases = _claimed(conn, 3)
    locked_id = leases[1][0]
    with psycopg.connect(clean_db) as holder:  # an open transaction holding one job's row lock
        holder.execute("SELECT 1 FROM jobs.job WHERE id = %s FOR UPDATE", (locked_id,))
        # Were the statement to wait for that lock, this timeout would raise instead.
        conn.execute("SET statement_timeout = '2s'")
        rows = conn.execute(
            "SELECT job_id, held, alive FROM jobs.heartbeat_many(%s, 'w1', %s)",
            ([i for i, _ in leases], [v for _, v in leases])).fetchall()
        holder.rollback()
    assert rows == [(leases[0][0], True, True), (locked_id, None, None), (leases[2][0], True, True)]


def test_worker_and_reaper_racing_for_one_expired_lease_apply_exactly_one_exit(conn, clean_db):
    leases = _claimed(conn, 50, lease="1 second")
    conn.execute("UPDATE jobs.job SET lease_expires_at = now() - interval '1 second' WHERE status = 'processing'")
    barrier = threading.Barrier(2)
    out = {}

    def complete():
        with psycopg.connect(clean_db, autocommit=True) as c:
            barrier.wait(timeout=10)
            out["done"] = c.execute(
                "SELECT job_id, accepted FROM jobs.complete_many(%s, 'w1', %s, NULL)",
                ([i for i, _ in leases], [v for _, v in leases])).fetchall()

    def reap():
        with psycopg.connect(clean_db, autocommit=True) as c:
            barrier.wait(timeout=10)
            out["reaped"] = c.execute("SELECT job_id FROM jobs.reap()").fetchall()

    threads = [threading.Thread(target=complete), threading.Thread(target=reap)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    accepted = {i for i, ok in out["done"] if ok}
    reaped = {i for (i,) in out["reaped"]}
    assert accepted.isdisjoint(reaped)
    assert accepted | reaped == {i for i, _ in leases}
    exits = conn.execute(
        "SELECT job_id, count(*) FROM jobs.history WHERE reason IN ('completed', 'reaped') GROUP BY job_id").fetchall()
    assert sorted(exits) == sorted((i, 1) for i, _ in leases)


def test_a_failure_decided_before_a_concurrent_cancel_is_decided_again(conn, clean_db):
    """fail_many reads the row (no cancel yet: 'retried'), then waits on the row lock of a
    transaction that requests a cancel. After that commits, the same call must end the job
    as cancelled, not requeue it on a decision made from stale facts."""
    [(job_id, version)] = _claimed(conn, 1)
    with psycopg.connect(clean_db) as canceller, psycopg.connect(clean_db, autocommit=True) as failer:
        canceller.execute("SELECT jobs.cancel(%s)", (job_id,))  # holds the row lock, uncommitted
        failer_pid = failer.execute("SELECT pg_backend_pid()").fetchone()[0]
        out = {}

        def fail():
            out["rows"] = failer.execute(
                "SELECT job_id, accepted, status FROM jobs.fail_many(%s, 'w1', %s, %s, %s)",
                ([job_id], [version], ["HTTP 503"], [True])).fetchall()

        t = threading.Thread(target=fail)
        t.start()
        wait_until(lambda: conn.execute(
            "SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = %s", (failer_pid,)).fetchone()[0],
            what="fail_many waiting on the row lock")
        canceller.commit()
        t.join(timeout=30)
    assert out["rows"] == [(job_id, True, "failed")]
    reasons = [r[0] for r in conn.execute(
        "SELECT reason FROM jobs.events(%s)", (job_id,)).fetchall()]
    assert reasons == ["submitted", "claimed", "cancel_requested", "cancelled"]
