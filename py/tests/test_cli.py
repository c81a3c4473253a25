"""The jobfence command: output, --json and the exit codes documented in docs/cli.md."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys

import pytest

from conftest import REPO


@pytest.fixture
def cli(declared, redis_url):
    env = dict(os.environ, JOBFENCE_DATABASE_URL=declared, JOBFENCE_REDIS_URL=redis_url)

    def run(*args, env_extra=None, timeout=60):
        return subprocess.run([sys.executable, "-m", "jobfence", *args], cwd=REPO,
                              env=dict(env, **(env_extra or {})), capture_output=True,
                              text=True, timeout=timeout)
    return run


def test_submit_status_cancel_replay_round_trip(cli):
    out = cli("submit", "noop", "--payload", '{"a": 1}', "--json")
    assert out.returncode == 0, out.stderr
    job_id = json.loads(out.stdout)["id"]

    status = cli("status", str(job_id), "--json")
    assert status.returncode == 0
    data = json.loads(status.stdout)
    assert data["status"] == "queued" and data["payload"] == {"a": 1}
    assert [e["reason"] for e in data["events"]] == ["submitted"]

    human = cli("status", str(job_id))
    assert re.search(r"^status\s+queued$", human.stdout, re.M)
    assert "reason" in human.stdout and "submitted" in human.stdout

    cancelled = cli("cancel", str(job_id), "--json")
    assert cancelled.returncode == 0
    assert json.loads(cancelled.stdout) == {"job_id": job_id, "accepted": True, "status": "failed"}
    again = cli("cancel", str(job_id))
    assert again.returncode == 4 and "nothing to cancel" in again.stderr

    replayed = cli("replay", str(job_id), "--json")
    assert replayed.returncode == 0 and json.loads(replayed.stdout)["replayed"] is True
    # Replaying a queued job breaks the state machine: JB003, refused.
    refused = cli("replay", str(job_id))
    assert refused.returncode == 4 and "JB003" not in refused.stdout
    assert "refused" in refused.stderr


def test_exit_codes_for_bad_input_and_missing_jobs(cli):
    missing = cli("status", "999999")
    assert missing.returncode == 3 and "not found" in missing.stderr
    unknown = cli("submit", "no_such_kind")
    assert unknown.returncode == 5 and "JB005" in unknown.stderr
    bad_json = cli("submit", "noop", "--payload", "{nope")
    assert bad_json.returncode == 2 and "not JSON" in bad_json.stderr
    not_object = cli("submit", "noop", "--payload", "[1, 2]")
    assert not_object.returncode == 5 and "22023" in not_object.stderr
    usage = cli("status")
    assert usage.returncode == 2


def test_unreachable_database_exits_6(cli):
    out = cli("--database-url", "postgresql://127.0.0.1:1/none", "status", "1")
    assert out.returncode == 6 and "PostgreSQL unavailable" in out.stderr


def test_submit_many_and_wait_with_a_worker(cli, procs):
    procs.worker("w1", "--concurrency", "4")
    out = cli("submit", "noop", "--count", "50", "--wait", "--timeout", "30")
    assert out.returncode == 0, out.stderr
    assert "50/50 terminal" in out.stderr
    failed = cli("submit", "flaky", "--payload", '{"p": 1, "permanent": true}', "--wait", "--json")
    assert failed.returncode == 9
    assert json.loads(failed.stdout)["status"] == "failed"


def test_db_commands_wrap_sqitch(cli):
    verify = cli("db", "verify", "--json")
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert json.loads(verify.stdout)["ok"] is True
    missing = cli("db", "deploy", env_extra={"PATH": "/nonexistent"})
    assert missing.returncode == 7 and "sqitch is not installed" in missing.stderr


def test_run_starts_the_stack_processes_jobs_and_stops_on_sigterm(declared, redis_url, tmp_path, cli):
    env = dict(os.environ, JOBFENCE_DATABASE_URL=declared, JOBFENCE_REDIS_URL=redis_url,
               JOBFENCE_EXAMPLE_LEASE_TIMEOUT="2", JOBFENCE_EXAMPLE_BACKOFF_BASE="0.2",
               JOBFENCE_EXAMPLE_BACKOFF_MAX="0.4")
    log = open(tmp_path / "run.log", "w")
    run = subprocess.Popen([sys.executable, "-m", "jobfence", "--log-format", "json", "run",
                            "--workers", "2", "--concurrency", "4", "--reaper-interval", "0.5",
                            "--stale-after", "1", "--grace", "5"],
                           cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        out = cli("demo", "--jobs", "300", "--crash", "1", "--timeout", "60", "--json",
                  timeout=90)
        assert out.returncode == 0, out.stderr
        summary = json.loads(out.stdout)
        counts = summary["counts"]
        assert counts.get("done", 0) + counts.get("failed", 0) == 300
        lines = [json.loads(l) for l in open(tmp_path / "run.log") if l.startswith("{")]
        # The crash job killed a worker once; the supervisor started a new one.
        assert any(l.get("event") == "child_exited" for l in lines)
        run.send_signal(signal.SIGTERM)
        assert run.wait(20) == 0
        lines = [json.loads(l) for l in open(tmp_path / "run.log") if l.startswith("{")]
        assert any(l.get("event") == "stopped" for l in lines)
        assert sum(1 for l in lines if l.get("event") == "worker_stopped") >= 2
    finally:
        if run.poll() is None:
            run.kill()
        log.close()
