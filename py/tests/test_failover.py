"""The queue through the loss of its primary (docs/operations.md, "Failover"): the chaos run
on a failover formation of its own — PostgreSQL under pg_auto_failover with a synchronous
standby, Redis under Sentinel — every process on one multi-host URL and one redis+sentinel
URL, with pg_failover, pg_switchover and redis_failover among the faults. Nothing
acknowledged may be lost or applied twice, and the history must audit clean."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from conftest import REPO


@pytest.mark.skipif(shutil.which("pg_autoctl") is None,
                    reason="pg_auto_failover not installed (scripts/setup --test)")
def test_a_quick_failover_run_loses_nothing(tmp_path):
    report = tmp_path / "report.json"
    done = subprocess.run([sys.executable, "-m", "jobfence", "chaos", "--failover", "--quick",
                           "--seed", "11", "--json", "--report", str(report)],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    assert report.exists(), done.stdout[-3000:] + done.stderr[-3000:]
    result = json.loads(report.read_text())
    assert done.returncode == 0, (result.get("reasons"), done.stderr[-3000:])
    assert result["ok"] and result["failover"], result["reasons"]
    assert result["jobs"]["lost"] == 0
    assert result["audit"]["ok"]
    kinds = {f["kind"]: f for f in result["faults"]}
    for kind in ("pg_failover", "pg_switchover", "redis_failover"):
        assert kind in kinds and kinds[kind]["error"] is None, kinds.get(kind)
    # The standby took writes, and jobs completed after it did.
    assert kinds["pg_failover"]["detail"]["new_primary"] != kinds["pg_failover"]["detail"]["lost"]
    assert kinds["pg_failover"]["first_completion_s"] is not None
    assert kinds["redis_failover"]["detail"]["new_master_port"] != kinds["redis_failover"]["detail"]["lost_port"]
