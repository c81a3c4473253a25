"""A backlog of expired leases is drained in one go, not one batch per interval.

jobs.reap takes at most ``batch`` leases per call, oldest first. A reaper that slept its
interval after every full batch would hold a fresh expiry behind ``backlog / batch``
intervals; it goes again at once instead (docs/reliability.md, "Sizing the reaper").
"""

from __future__ import annotations

import threading

from jobfence.reaper import Reaper

from conftest import wait_until


def test_reaper_drains_a_backlog_larger_than_its_batch_without_waiting_an_interval(clean_db, conn, redis_url):
    conn.execute("SELECT jobs.define_type('backlog', lease_timeout => '1 second', timeout => '1 hour')")
    conn.execute("SELECT count(*) FROM jobs.submit_many((SELECT jsonb_agg(jsonb_build_object('kind', 'backlog', 'notify', false))"
                 " FROM generate_series(1, 45)))")
    ids = [r[0] for r in conn.execute("SELECT id FROM jobs.job ORDER BY id").fetchall()]
    assert len(conn.execute("SELECT * FROM jobs.claim_many(%s, 'gone:1')", (ids,)).fetchall()) == 45
    # The worker died long ago: every lease is past its expiry.
    conn.execute("UPDATE jobs.job SET lease_expires_at = now() - interval '1 minute'")

    # An interval no test waits out: only going again without sleeping drains 45 leases
    # in batches of 10 before the deadline below.
    reaper = Reaper(clean_db, redis_url, interval=600.0, batch=10)
    runner = threading.Thread(target=reaper.run, daemon=True)
    runner.start()
    try:
        def requeued():
            return conn.execute("SELECT count(*) FROM jobs.job WHERE status = 'queued' AND lease_version = 2"
                                ).fetchone()[0] == 45

        wait_until(requeued, 60, interval=0.1, what="all 45 expired leases requeued")
        reaped = conn.execute("SELECT count(*) FROM jobs.event WHERE reason = 'reaped'").fetchone()[0]
        assert reaped == 45
    finally:
        reaper.stop()
        runner.join(30)
    assert not runner.is_alive()
