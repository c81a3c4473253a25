"""The worker presents its lease tokens: with jobs.lease_policy requiring them, every
write the worker makes (batched completions and failures, heartbeats, a transactional
completion) is still accepted, so none of them goes out without its token."""

from __future__ import annotations

import pytest

from conftest import wait_until

@pytest.fixture
def tokens_required(conn):
    conn.execute("SELECT jobs.configure_leases(require_lease_token => true)")
    try:
        yield conn
    finally:
        conn.execute("SELECT jobs.configure_leases(bind_session_role => true, require_lease_token => false)")


def test_worker_reports_with_its_tokens_when_the_server_requires_them(procs, client, tokens_required):
    conn = tokens_required
    quick = client.submit_many([{"kind": "noop"}] * 20)
    retried = client.submit("flaky", {"fail_times": 1})
    # Longer than its 2 s lease (E2E_TYPE_OPTIONS): done only if its heartbeats were accepted.
    procs.reaper()
    beating = client.submit("sleep", {"seconds": 4})
    transactional = client.submit("transfer", {"amount": 1})
    ids = quick + [retried, beating, transactional]
    w = procs.worker("w1", "--batch", "50")
    wait_until(lambda: client.status_counts(ids).get("done", 0) == len(ids), 30,
               what="every job done under required lease tokens")
    assert [e.reason for e in client.events(retried)] == [
        "submitted", "claimed", "retried", "claimed", "completed"]
    assert [e.reason for e in client.events(beating)] == ["submitted", "claimed", "completed"]
    assert not w.find("heartbeat_lost") and not w.find("lease_lost")
    # Every event carries the session role that wrote it, whatever worker name it gave.
    roles = {e.extra["session_role"] for i in ids for e in client.events(i)}
    me = conn.execute("SELECT session_user::text").fetchone()[0]
    assert roles == {me}
