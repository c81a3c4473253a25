"""Dead letters page someone, and the page cannot vanish (docs/observability.md, "Dead
letters"): a ``jobs.page`` row commits with the failure; the reapers' ``--dead-letter-webhook``
forwarders deliver it at least once, with a stable id, retried until a 2xx, however long the
webhook is away, however often a forwarder dies, however many run, whatever is NOTIFYed."""

from __future__ import annotations

import json
import subprocess
import sys

import psycopg
import pytest

from conftest import wait_until
from webhook_helpers import FAST, Hook


@pytest.fixture
def hook():
    h = Hook()
    yield h
    h.close()


def _dead_letter(conn, kind: str, error: str = "poison") -> int:
    """A job of ``kind`` (no retries) claimed and failed: a dead letter once this commits."""
    job_id = conn.execute("SELECT id FROM jobs.submit(%s, notify => false)", (kind,)).fetchone()[0]
    lease = conn.execute("SELECT lease_version FROM jobs.claim(%s, 'w1')", (job_id,)).fetchone()[0]
    conn.execute("SELECT jobs.fail(%s, 'w1', %s, %s)", (job_id, lease, error))
    return job_id


def test_an_exhausted_job_is_announced_on_commit(conn, clean_db):
    conn.execute("SELECT jobs.define_type('dl.k', max_retries => 0)")
    with psycopg.connect(clean_db, autocommit=True) as listener:
        listener.execute("LISTEN jobs_dead_lettered")
        with conn.transaction():
            job_id = _dead_letter(conn, "dl.k")
            # Not before commit: a rolled-back failure must not page anyone.
            assert list(listener.notifies(timeout=0.2, stop_after=1)) == []
        notes = list(listener.notifies(timeout=5, stop_after=1))
    assert [json.loads(n.payload) for n in notes] == [{"ids": [job_id]}]


def test_a_retried_or_cancelled_job_is_not_a_dead_letter(conn, clean_db):
    conn.execute("SELECT jobs.define_type('dl.r', max_retries => 3)")
    with psycopg.connect(clean_db, autocommit=True) as listener:
        listener.execute("LISTEN jobs_dead_lettered")
        _dead_letter(conn, "dl.r")  # retried: budget left
        queued = conn.execute("SELECT id FROM jobs.submit('dl.r', notify => false)").fetchone()[0]
        conn.execute("SELECT jobs.cancel(%s)", (queued,))
        assert list(listener.notifies(timeout=0.5, stop_after=1)) == []




def _pages(conn) -> list[tuple]:
    return conn.execute("SELECT id, job_id, attempts, delivered_at IS NOT NULL FROM jobs.page "
                        "ORDER BY id").fetchall()


def test_the_reaper_posts_each_dead_letter_to_the_webhook(procs, conn, hook):
    conn.execute("SELECT jobs.define_type('dl.k', max_retries => 0)")
    reaper = procs.reaper("--dead-letter-webhook", hook.url, *FAST)
    reaper.wait_for("dead_letters_listening")
    first = _dead_letter(conn, "dl.k", "bad input")
    second = _dead_letter(conn, "dl.k", "still bad")
    wait_until(lambda: len(hook.jobs()) >= 2, 15, what=f"two posts\n{reaper.tail()}")
    posted = {j["id"]: j for j in hook.jobs()}
    assert set(posted) == {first, second}
    assert posted[first]["kind"] == "dl.k"
    assert posted[first]["error"] == "bad input"
    assert posted[first]["reason"] == "exhausted"  # retryable, but no retries left
    assert hook.bodies[0]["event"] == "dead_lettered"
    # The stable id: the header and the body name the page, which names the job.
    pages = {page_id: job_id for page_id, job_id, _, _ in _pages(conn)}
    for header, body in hook.received:
        assert int(header) == body["page_id"] and pages[body["page_id"]] == body["jobs"][0]["id"]
    wait_until(lambda: all(d for *_, d in _pages(conn)), 10, what="both settled as delivered")
    reaper.wait_for("dead_letters_forwarded")


@pytest.mark.parametrize("how", ["503", "302", "garbage"])
def test_a_failing_webhook_is_retried_until_it_answers(procs, conn, how):
    """A 5xx, a redirect (not followed: it would drop the body) and a reply that is not HTTP
    at all are each a failed attempt, retried with backoff; the forwarder survives each."""
    hook = Hook(fail=2, how=how)
    try:
        conn.execute("SELECT jobs.define_type('dl.k', max_retries => 0)")
        reaper = procs.reaper("--dead-letter-webhook", hook.url, *FAST)
        reaper.wait_for("dead_letters_listening")
        job_id = _dead_letter(conn, "dl.k")
        wait_until(lambda: hook.jobs(), 20, what=f"a post after two failures\n{reaper.tail()}")
        assert [j["id"] for j in hook.jobs()] == [job_id]
        assert hook.attempts == 3
        assert reaper.find("dead_letters_post_failed")
        wait_until(lambda: _pages(conn)[0][2:] == (3, True), 10, what="three attempts, delivered")
    finally:
        hook.close()


def test_a_webhook_down_for_many_rounds_loses_nothing_and_jobfence_pages_says_why(
        procs, conn, clean_db):
    """Twelve failed rounds (the old forwarder gave up after five): every page waits, listed
    by `jobfence pages` with its last error, and is delivered once the webhook answers."""
    hook = Hook(fail=10**9)
    try:
        conn.execute("SELECT jobs.define_type('dl.k', max_retries => 0)")
        reaper = procs.reaper("--dead-letter-webhook", hook.url, *FAST)
        reaper.wait_for("dead_letters_listening")
        dead = {_dead_letter(conn, "dl.k", f"bad {n}") for n in range(3)}
        wait_until(lambda: hook.attempts >= 12 * len(dead), 60,
                   what=f"twelve rounds of failures\n{reaper.tail()}")
        listed = subprocess.run([sys.executable, "-m", "jobfence", "--database-url", clean_db,
                                 "pages", "--json"], capture_output=True, text=True, timeout=60)
        assert listed.returncode == 0, listed.stderr
        report = json.loads(listed.stdout)
        assert report["undelivered"] == 3 and report["failing"] == 3
        assert {p["job_id"] for p in report["pages"]} == dead
        assert all("503" in p["last_error"] and p["attempts"] >= 2 for p in report["pages"])
        table = subprocess.run([sys.executable, "-m", "jobfence", "--database-url", clean_db,
                                "pages"], capture_output=True, text=True, timeout=60)
        assert table.returncode == 0 and "3 page(s) undelivered" in table.stderr
        assert "failing" in table.stdout and "Traceback" not in table.stderr
        hook.fail = 0  # the webhook is back
        wait_until(lambda: hook.delivered_job_ids() == dead, 30,
                   what=f"every page delivered once the webhook answers\n{reaper.tail()}")
        wait_until(lambda: all(d for *_, d in _pages(conn)), 10, what="all settled")
        assert not reaper.find("dead_letters_dropped")
    finally:
        hook.close()


def test_a_dead_letter_while_no_forwarder_runs_is_delivered_when_one_starts(procs, conn, hook):
    """Nobody listened to its NOTIFY: the page in PostgreSQL is what is delivered."""
    conn.execute("SELECT jobs.define_type('dl.k', max_retries => 0)")
    job_id = _dead_letter(conn, "dl.k", "while nobody listened")
    reaper = procs.reaper("--dead-letter-webhook", hook.url, *FAST)
    wait_until(lambda: hook.delivered_job_ids() == {job_id}, 20,
               what=f"the page written before the forwarder started\n{reaper.tail()}")


def test_a_forwarder_killed_mid_delivery_leaves_the_page_to_the_next_with_the_same_id(
        procs, conn):
    hook = Hook(hang_first=True)
    try:
        conn.execute("SELECT jobs.define_type('dl.k', max_retries => 0)")
        # Its POST may wait 0.8 s, so its claim holds the page 10 s (10 x timeout + 2 s):
        # killed well within that, and the next forwarder waits for the hold to end.
        first = procs.reaper("--dead-letter-webhook", hook.url, *FAST, "--dead-letter-timeout", "0.8")
        job_id = _dead_letter(conn, "dl.k")
        assert hook.hanging.wait(20), first.tail()
        first.proc.kill()  # kill -9 while the POST is in flight, before it is settled
        first.proc.wait(10)
        hook.release.set()
        second = procs.reaper("--dead-letter-webhook", hook.url, *FAST)
        wait_until(lambda: hook.delivered_job_ids() == {job_id}, 45,
                   what=f"the held page delivered by the next forwarder\n{second.tail()}")
        page_ids = {body["page_id"] for _, body in hook.received}
        assert len(page_ids) == 1, hook.received  # posted twice, under one id
        assert len(hook.received) >= 2
    finally:
        hook.close()


def test_two_forwarders_deliver_every_page_and_duplicates_only_under_the_same_id(procs, conn, hook):
    conn.execute("SELECT jobs.define_type('dl.k', max_retries => 0)")
    procs.reaper("--dead-letter-webhook", hook.url, *FAST)
    procs.start("reaper-2", "reaper", "--interval", "0.3", "--dead-letter-webhook", hook.url,
                *FAST).wait_for("reaper_ready")
    dead = {_dead_letter(conn, "dl.k", f"bad {n}") for n in range(40)}
    wait_until(lambda: hook.delivered_job_ids() == dead, 60, what="all forty delivered")
    by_page: dict[int, set[int]] = {}
    for header, body in hook.received:
        by_page.setdefault(body["page_id"], set()).add(body["jobs"][0]["id"])
        assert int(header) == body["page_id"]
    assert all(len(jobs) == 1 for jobs in by_page.values())
    assert len(by_page) == 40  # one page per dead letter, whoever posted it
    wait_until(lambda: all(d for *_, d in _pages(conn)), 10, what="all settled")


def test_a_flood_of_forged_notifies_never_costs_a_real_page(procs, conn, hook):
    """Anyone with CONNECT may NOTIFY jobs_dead_lettered: 20,000 forged messages (which once
    filled the forwarder's backlog and could drop a real page) only wake it; the page of
    the real dead letter among them is delivered, and nothing forged is posted."""
    conn.execute("SELECT jobs.define_type('dl.k', max_retries => 0)")
    done = conn.execute("SELECT id FROM jobs.submit('dl.k', notify => false)").fetchone()[0]
    reaper = procs.reaper("--dead-letter-webhook", hook.url, *FAST)
    reaper.wait_for("dead_letters_listening")
    with conn.transaction():
        conn.execute("SELECT pg_notify('jobs_dead_lettered', json_build_object('ids', ARRAY[%s, g])::text) "
                     "FROM generate_series(1, 10000) AS g", (done,))
    real = _dead_letter(conn, "dl.k")
    with conn.transaction():
        conn.execute("SELECT pg_notify('jobs_dead_lettered', 'junk ' || g) FROM generate_series(1, 10000) AS g")
    wait_until(lambda: hook.delivered_job_ids() == {real}, 30,
               what=f"the real dead letter\n{reaper.tail()}")
    assert [j["id"] for j in hook.jobs()] == [real]
    assert reaper.alive()


@pytest.mark.parametrize("url", ["ftp://example.com/x", "not a url", "http://", "https://[::1",
                                 "http://127.0.0.1:99999/", "http://exa mple.com/"])
def test_a_bad_webhook_url_is_a_usage_error(clean_db, url):
    proc = subprocess.run([sys.executable, "-m", "jobfence", "--database-url", clean_db, "reaper",
                           "--dead-letter-webhook", url], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2
    assert "URL" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_dead_charge_is_compensated_by_its_refund_job_once(procs, conn, client):
    """docs/python.md, "Compensating what cannot roll back": the example app's charge names
    refund as its on_dead kind. The dead charge's transaction submits the refund; a worker
    runs it; a replayed charge that dies again does not refund twice."""
    procs.worker("w-comp")
    procs.reaper()  # the refund is pushed by the relay or, here, the reaper's re-push
    charge = client.submit("charge", {"cents": 500, "declined": True})
    wait_until(lambda: client.get(charge).status == "failed", 20, what="the charge dead-lettered")
    refunds = lambda: conn.execute(  # noqa: E731
        "SELECT id, status, result FROM jobs.job WHERE kind = 'refund'").fetchall()
    wait_until(lambda: [r for r in refunds() if r[1] == "done"], 30, what="the refund ran")
    ((refund_id, _, result),) = refunds()
    assert result == {"refunded": charge, "cents": 500}
    assert client.replay(charge)
    wait_until(lambda: client.get(charge).status == "failed" and client.get(charge).retry_count > 0
               and len(client.events(charge)) > 4, 20, what="the replayed charge died again")
    assert [r[0] for r in refunds()] == [refund_id]
