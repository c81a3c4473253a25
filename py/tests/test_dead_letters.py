"""Dead letters page someone (docs/observability.md): ``jobs_dead_lettered`` on commit, and the
reaper's ``--dead-letter-webhook`` forwarding it to an HTTP endpoint — retried, checked
against ``jobs.dead_letters`` so a forged message posts nothing."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import psycopg
import pytest

from conftest import wait_until


class Hook:
    """A local webhook receiver: records every POSTed body; answers the first ``fail`` ones
    with ``how``: "503", "302" (a redirect) or "garbage" (bytes that are not HTTP)."""

    def __init__(self, fail: int = 0, how: str = "503"):
        self.bodies: list[dict] = []
        self.attempts = 0
        self.fail = fail
        self.how = how
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - the http.server API
                length = int(self.headers["Content-Length"])
                body = json.loads(self.rfile.read(length))
                hook.attempts += 1
                if hook.attempts <= hook.fail:
                    if hook.how == "garbage":
                        self.wfile.write(b"SSH-2.0-OpenSSH_9.2\r\n")
                        self.close_connection = True
                        return
                    self.send_response(int(hook.how))
                    if hook.how == "302":
                        self.send_header("Location", "/landing")
                    self.end_headers()
                    return
                hook.bodies.append(body)
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/page"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def jobs(self) -> list[dict]:
        return [j for b in self.bodies for j in b["jobs"]]

    def close(self):
        self.server.shutdown()
        self.server.server_close()


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


def test_the_reaper_posts_each_dead_letter_to_the_webhook(procs, conn, hook):
    conn.execute("SELECT jobs.define_type('dl.k', max_retries => 0)")
    reaper = procs.reaper("--dead-letter-webhook", hook.url)
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
    reaper.wait_for("dead_letters_forwarded")


@pytest.mark.parametrize("how", ["503", "302", "garbage"])
def test_a_failing_webhook_is_retried_until_it_answers(procs, conn, how):
    """A 5xx, a redirect (not followed: it would drop the body) and a reply that is not HTTP
    at all are each a failed attempt, retried; the forwarder survives every one."""
    hook = Hook(fail=2, how=how)
    try:
        conn.execute("SELECT jobs.define_type('dl.k', max_retries => 0)")
        reaper = procs.reaper("--dead-letter-webhook", hook.url)
        reaper.wait_for("dead_letters_listening")
        job_id = _dead_letter(conn, "dl.k")
        wait_until(lambda: hook.jobs(), 20, what=f"a post after two failures\n{reaper.tail()}")
        assert [j["id"] for j in hook.jobs()] == [job_id]
        assert hook.attempts == 3
        assert len(reaper.find("dead_letters_post_failed")) == 2
    finally:
        hook.close()


def test_a_forged_message_posts_nothing(procs, conn, hook):
    """Any role can NOTIFY: the forwarder posts only what jobs.dead_letters confirms."""
    conn.execute("SELECT jobs.define_type('dl.k', max_retries => 0)")
    done = conn.execute("SELECT id FROM jobs.submit('dl.k', notify => false)").fetchone()[0]
    reaper = procs.reaper("--dead-letter-webhook", hook.url)
    reaper.wait_for("dead_letters_listening")
    for payload in (json.dumps({"ids": [done, 987654321]}), "not json", '{"ids": "x"}', "[1]"):
        conn.execute("SELECT pg_notify('jobs_dead_lettered', %s)", (payload,))
    real = _dead_letter(conn, "dl.k")  # a real one after the forgeries: posted alone
    wait_until(lambda: hook.jobs(), 15, what=f"the real dead letter\n{reaper.tail()}")
    assert [j["id"] for j in hook.jobs()] == [real]
    # Replaying the real one's message pages nobody twice; the next real one still goes out.
    conn.execute("SELECT pg_notify('jobs_dead_lettered', %s)", (json.dumps({"ids": [real]}),))
    later = _dead_letter(conn, "dl.k")
    wait_until(lambda: len(hook.jobs()) >= 2, 15, what=f"the second dead letter\n{reaper.tail()}")
    assert [j["id"] for j in hook.jobs()] == [real, later]
    assert reaper.alive()


@pytest.mark.parametrize("url", ["ftp://example.com/x", "not a url", "http://", "https://[::1",
                                 "http://127.0.0.1:99999/", "http://exa mple.com/"])
def test_a_bad_webhook_url_is_a_usage_error(clean_db, url):
    proc = subprocess.run([sys.executable, "-m", "jobfence", "--database-url", clean_db, "reaper",
                           "--dead-letter-webhook", url], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2
    assert "URL" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("payload", ["[" * 5000 + "]" * 5000, '{"ids": ' + "[" * 3000 + "]" * 3000 + "}",
                                     "x" * 9000, "not json", "[1]", '{"ids": "1"}', '{"ids": [true, -1, 1e3]}'])
def test_a_forged_dead_letter_message_yields_no_ids_and_never_raises(payload):
    from jobfence.deadletters import parse_message

    assert parse_message(payload) == []


def test_a_flood_that_fills_the_backlog_is_one_error_line_with_a_count(caplog):
    """30,000 forged messages once gave 19,732 ERROR lines; the backlog's overflow is one line
    a minute with how many ids it dropped (docs/security.md)."""
    from jobfence.deadletters import DeadLetterForwarder

    forwarder = DeadLetterForwarder("postgresql://unused", db=None, webhook="http://127.0.0.1:9/",
                                    capacity=10)
    with caplog.at_level("ERROR", logger="jobfence.deadletters"):
        for n in range(1, 3001):
            forwarder._enqueue([n])
    lines = [r for r in caplog.records if getattr(r, "event", None) == "dead_letters_dropped"]
    assert len(lines) == 1, len(lines)
    assert lines[0].fields["count"] == 1  # the first overflow; the rest wait for the next line
    assert forwarder.dropped == 3000 - 10
