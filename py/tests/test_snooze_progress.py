"""Snooze, progress and bulk re-drive through the real stack: a handler's ``raise Snooze``
puts its job back without spending the retry budget, ``ctx.progress`` is readable while the
job runs and after, and ``jobs.replay_many`` re-queues a kind's dead letters in one call
(Python client, CLI and HTTP)."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from conftest import wait_until


def test_snoozed_job_runs_after_its_delay_without_spending_retries(procs, client):
    # The worker is ready before the job exists, so its first run comes well before `at`
    # however long a worker takes to start.
    procs.reaper()
    w = procs.worker("w1")
    at = time.time() + 1.0
    job_id = client.submit("not_before", {"at": at})
    wait_until(lambda: client.get(job_id).status == "done", 20, what="snoozed job done")
    job = client.get(job_id)
    assert job.result["ran_at"] >= at
    assert job.retry_count == 0 and job.snoozes >= 1
    reasons = [e.reason for e in client.events(job_id)]
    assert reasons[:3] == ["submitted", "claimed", "snoozed"] and reasons[-1] == "completed"
    assert "retried" not in reasons
    assert w.find("snoozed", job_id=job_id), "a snooze is logged at DEBUG with its job id"
    assert not w.find("lease_lost")


def test_snooze_past_the_bound_fails_the_job(procs, client, conn):
    job_id = client.submit("not_before", {"at": time.time() + 3600})
    conn.execute("UPDATE jobs.job SET snoozes = jobs.max_snoozes() WHERE id = %s", (job_id,))
    procs.worker("w1")
    wait_until(lambda: client.get(job_id).status == "failed", 20, what="over-snoozed job failed")
    assert client.get(job_id).error.startswith("snoozed 100 times")


def test_progress_is_readable_while_running_and_after(procs, client):
    job_id = client.submit("steps", {"steps": 4, "seconds": 0.4})
    procs.worker("w1")
    wait_until(lambda: (client.get(job_id).progress or {}).get("done", 0) >= 1, 20,
               what="first progress report")
    running = client.get(job_id)
    assert running.status == "processing" and running.progress["of"] == 4
    assert running.progress_at is not None
    wait_until(lambda: client.get(job_id).status == "done", 20, what="steps job done")
    assert client.get(job_id).progress == {"done": 4, "of": 4}


def test_progress_from_a_process_handler(procs, client):
    """A child process has no connection: its reports go through the worker, which makes the
    jobs.progress call and answers, so the job's progress is as readable as a thread's."""
    job_id = client.submit("steps_process", {"steps": 3, "seconds": 0.4})
    w = procs.worker("w1")
    wait_until(lambda: (client.get(job_id).progress or {}).get("done", 0) >= 1, 30,
               what="first progress report from the child")
    assert client.get(job_id).status == "processing"
    wait_until(lambda: client.get(job_id).status == "done", 30, what="steps_process job done")
    job = client.get(job_id)
    assert job.progress == {"done": 3, "of": 3}
    assert job.result["steps"] == 3 and job.result["pid"] != w.proc.pid
    assert not w.find("process_died") and not w.find("process_killed")


def test_cli_status_shows_progress(procs, client, clean_db):
    job_id = client.submit("steps", {"steps": 1, "seconds": 0})
    procs.worker("w1")
    wait_until(lambda: client.get(job_id).status == "done", 20, what="steps job done")
    shown = subprocess.run([sys.executable, "-m", "jobfence", "--database-url", clean_db,
                            "status", str(job_id)], capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0, shown.stderr
    line = next(l for l in shown.stdout.splitlines() if l.startswith("progress "))
    assert json.loads(line.split(None, 1)[1]) == {"done": 1, "of": 1}


def _dead_letters(client, conn, kind, n, error):
    ids = client.submit_many([{"kind": kind, "payload": {"i": i}} for i in range(n)])
    # Straight to failed through the SQL contract: claim and fail for good.
    conn.execute("SELECT jobs.claim_many(%s, 'setup')", (ids,))
    conn.execute("SELECT * FROM jobs.fail_many(%s, 'setup', %s, %s, %s)",
                 (ids, [1] * n, [error] * n, [False] * n))
    return ids


def test_replay_many_requeues_and_workers_run_them(procs, client, conn):
    broken = _dead_letters(client, conn, "noop", 5, "bank timeout")
    other = _dead_letters(client, conn, "noop", 2, "card declined")
    assert client.replay_many("noop", error_like="%timeout%", max_jobs=3) == broken[:3]
    assert client.replay_many("noop", error_like="%timeout%") == broken[3:]
    procs.worker("w1")
    wait_until(lambda: client.status_counts(broken).get("done", 0) == 5, 20,
               what="replayed jobs done")
    assert client.status_counts(other) == {"failed": 2}
    assert client.replay_many("noop", error_like="%timeout%") == []


def _cli(clean_db, redis_url, *args):
    return subprocess.run([sys.executable, "-m", "jobfence", "--database-url", clean_db,
                           "--redis-url", redis_url, *args],
                          capture_output=True, text=True, timeout=60)


def test_cli_replay_many(client, conn, clean_db, redis_url):
    ids = _dead_letters(client, conn, "noop", 3, "bank timeout")
    out = _cli(clean_db, redis_url, "replay-many", "--kind", "noop", "--max-jobs", "2",
               "--failed-since", "3600", "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {"replayed": 2, "ids": ids[:2]}
    out = _cli(clean_db, redis_url, "replay-many", "--kind", "noop")
    assert out.returncode == 0 and "replayed 1 failed job(s)" in out.stdout
    out = _cli(clean_db, redis_url, "replay-many", "--kind", "noop")
    assert out.returncode == 0 and "nothing was changed" in out.stdout


@pytest.mark.parametrize("args, message", [
    (["--max-jobs", "0"], "--max-jobs"),
    (["--failed-since", "yesterday"], "neither an ISO 8601 time"),
    (["--error-like", "\\"], "--error-like"),
    (["--error-like", "100\\\\\\"], "escape character"),
    (["--error-like", "é" * 2049], "over the limit of 4096"),
    (["--kind", "Bad Kind"], "--kind"),
])
def test_cli_replay_many_refuses_bad_input(clean_db, redis_url, args, message):
    out = _cli(clean_db, redis_url, "replay-many", *args)
    assert out.returncode == 2 and message in out.stderr, out.stderr
    assert "Traceback" not in out.stderr


def test_replay_filters_are_refused_whether_or_not_a_job_would_match(
        client, conn, clean_db, redis_url):
    # LIKE refuses a pattern ending in its escape character only when it compares it with a
    # row, and no job has a malformed kind: both are checked before the statement runs.
    from jobfence.errors import InvalidParameter

    for existing in (False, True):
        if existing:
            _dead_letters(client, conn, "noop", 1, "disk 100% full")
        for filters in ({"error_like": "\\"}, {"error_like": "%\\\\\\"},
                        {"kind": "Bad Kind"}):
            with pytest.raises(InvalidParameter) as refused:
                client.replay_many(filters.get("kind"), error_like=filters.get("error_like"))
            assert refused.value.sqlstate == "22023" and refused.value.hint, refused.value
        out = _cli(clean_db, redis_url, "replay-many", "--error-like", "\\")
        assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
        out = _cli(clean_db, redis_url, "replay-many", "--kind", "Bad Kind", "--json")
        assert out.returncode == 2, out.stderr
    assert conn.execute("SELECT array_agg(status::text) FROM jobs.job").fetchone()[0] == ["failed"]
    # An escaped escape character is a literal one.
    assert len(client.replay_many("noop", error_like="%100\\%%")) == 1
