"""The chaos runner: a quick run through the real processes must end with nothing lost or
applied twice and every fault kind injected; and its verdict must fail on a history that
lost a job or applied an effect twice."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from conftest import ADMIN_URL, REPO

from jobfence_chaos import report
from jobfence_chaos.faults import KINDS
from jobfence_chaos.workload import app, create_tables
from jobfence.db import Database


@pytest.mark.serial
def test_quick_run_loses_nothing_and_injects_every_fault():
    env = dict(os.environ)
    env.pop("JOBFENCE_API_TOKENS", None)
    done = subprocess.run(
        [sys.executable, "-m", "jobfence", "chaos", "--quick", "--json", "--seed", "11",
         "--admin-url", ADMIN_URL],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert done.stdout.strip(), f"no report (exit {done.returncode}):\n{done.stderr[-4000:]}"
    result = json.loads(done.stdout)
    assert done.returncode == 0, f"verdict {result['reasons']}\n{done.stderr[-3000:]}"
    assert result["ok"] is True and result["reasons"] == []
    assert result["jobs"]["lost"] == 0 and result["jobs"]["not_terminal"] == 0
    assert result["jobs"]["done"] + result["jobs"]["failed"] == result["jobs"]["submitted"] > 500
    assert result["duplicates"]["accepted_completions"] == 0
    assert result["duplicates"]["transactional_effects"] == 0
    assert result["duplicates"]["effect_anomalies"] == 0
    assert result["fan_in"]["coordinators"] > 0 and result["fan_in"]["violations"] == 0
    assert result["ordering"]["jobs"] > 0 and result["ordering"]["violations"] == 0
    assert result["audit"]["ok"] is True
    assert set(result["faults_injected"]) == set(KINDS), result["faults_injected"]
    assert all(f["error"] is None for f in result["faults"])
    # The faults did what they are for: parked submits were recovered, leases were reaped
    # and the stopped worker's stale reports were refused.
    assert result["events"].get("enqueue_failed", 0) > 0
    assert result["events"].get("recovered", 0) > 0
    assert result["events"].get("reaped", 0) > 0
    assert result["fencing"]["jb001"] > 0
    assert {"client", "sql_notify", "api"} <= set(result["jobs"]["by_route"])


def _one_done_effect_job(db: Database) -> int:
    for task in app.tasks.values():
        db.define_type(task.kind, **task.options)
    with db.connection() as c:
        create_tables(c)
    job = db.submit("chaos_effect", {"seconds": 0})
    lease = db.claim_many([job.id], "verdict-test")[0]
    with db.connection() as c:
        c.execute("BEGIN")
        c.execute("INSERT INTO chaos.effect (job_id, lease_version, worker) VALUES (%s, %s, %s)",
                  (job.id, lease.lease_version, "verdict-test"))
        assert db.complete(job.id, "verdict-test", lease.lease_version, {"ok": True}, conn=c).accepted
        c.execute("COMMIT")
    return job.id


def _verdict(db: Database, acked: dict) -> tuple[bool, list[str], dict]:
    facts = report.collect(db, acked=acked, coordinators=[], faults=[], bound=3.0,
                           reaper_interval=0.5)
    ok, reasons = report.judge(facts)
    return ok, reasons, facts


def test_verdict_fails_on_a_missing_job_and_a_duplicate_effect(clean_db):
    db = Database(clean_db, max_size=1, open_timeout=10)
    try:
        job_id = _one_done_effect_job(db)
        ok, reasons, facts = _verdict(db, {job_id: "client"})
        assert ok, reasons
        assert facts["jobs"]["lost"] == 0 and facts["duplicates"]["transactional_effects"] == 0

        # An acknowledged id the database does not have is a lost job.
        ok, reasons, facts = _verdict(db, {job_id: "client", job_id + 1000: "api"})
        assert not ok and facts["jobs"]["lost"] == 1
        assert any("lost" in r for r in reasons)

        # A second effect row for one completed job is a duplicate effect.
        with db.connection() as c:
            c.execute("INSERT INTO chaos.effect (job_id, lease_version, worker) "
                      "VALUES (%s, 1, 'twin')", (job_id,))
        ok, reasons, facts = _verdict(db, {job_id: "client"})
        assert not ok and facts["duplicates"]["transactional_effects"] == 1
        assert any("transactional effect" in r for r in reasons)
    finally:
        db.close()


def test_verdict_fails_on_a_second_accepted_completion():
    facts = {"jobs": {"lost": 0, "lost_examples": [], "not_terminal": 0},
             "duplicates": {"accepted_completions": 1, "completion_examples": [7],
                            "transactional_effects": 0, "effect_anomalies": 0,
                            "effect_examples": []},
             "fan_in": {"violations": 0, "examples": []},
             "ordering": {"violations": 0, "examples": []},
             "audit": {"ok": False, "checks": [{"check": "one_completion", "violations": 1,
                                                "examples": [7]}]},
             "faults": []}
    ok, reasons = report.judge(facts)
    assert not ok
    assert any("more than one accepted completion" in r for r in reasons)
    assert any("one_completion=1" in r for r in reasons)


def test_usage_error_is_one_line_and_exit_2():
    done = subprocess.run([sys.executable, "-m", "jobfence", "chaos", "--admin-url", "nope"],
                          cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "Error: --admin-url must be a postgresql:// URL, got 'nope'"]
    assert done.stdout == ""
