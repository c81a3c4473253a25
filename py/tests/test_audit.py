"""``jobfence audit`` (docs/reliability.md): clean after real workers ran a mixed workload,
exit 1 naming the check when the history is forged behind the functions' back."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import psycopg

from conftest import REPO, wait_until


def _audit(database_url, *args):
    env = dict(os.environ, JOBFENCE_DATABASE_URL=database_url)
    # The SQL checks alone: the Redis comparison has its own tests (test_audit_signals.py).
    return subprocess.run([sys.executable, "-m", "jobfence", "audit", "--no-redis", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)


def _terminal(database_url, ids):
    with psycopg.connect(database_url) as c:
        return c.execute("SELECT count(*) FROM jobs.job WHERE id = ANY(%s) AND status IN ('done', 'failed')",
                         (ids,)).fetchone()[0]


def test_audit_is_clean_after_a_mixed_workload_and_finds_a_forged_completion(procs, client, declared):
    procs.worker("w1")
    procs.reaper()
    ids = client.submit_many([("noop", {"n": i}) for i in range(30)]
                             + [("flaky", {"p": 0.5}) for _ in range(20)])
    wait_until(lambda: _terminal(declared, ids) == len(ids), 60, what="every job terminal")

    clean = _audit(declared, "--json")
    assert clean.returncode == 0, clean.stdout + clean.stderr
    report = json.loads(clean.stdout)
    assert report["ok"] is True
    assert {r["check_name"] for r in report["checks"]} >= {"legal_transitions", "one_completion",
                                                           "row_matches_history"}
    assert all(r["violations"] == 0 for r in report["checks"])

    # A second accepted completion, written past the functions: exactly what fencing forbids.
    # Two rows: the job's own completion, its claimant's, is read from its row only while
    # jobs.event holds none (docs/design.md "What is recorded where").
    with psycopg.connect(declared, autocommit=True) as c:
        c.execute("INSERT INTO jobs.event (job_id, from_status, to_status, lease_version, worker, reason) "
                  "SELECT id, 'processing', 'done', lease_version, 'forger', 'completed' "
                  "FROM jobs.job, generate_series(1, 2) WHERE id = %s", (ids[0],))
    forged = _audit(declared)
    assert forged.returncode == 1
    line = next(ln for ln in forged.stdout.splitlines() if ln.startswith("one_completion"))
    assert str(ids[0]) in line
    assert "check(s) violated" in forged.stdout
    assert "Traceback" not in forged.stderr


def test_audit_bad_input_is_a_usage_error(clean_db):
    out = _audit(clean_db, "--reaper-interval", "0")
    assert out.returncode == 2
    assert "Traceback" not in out.stderr
