"""bench/statements (docs/performance.md, "Where the time goes, statement by statement"): a
private cluster with pg_stat_statements, the working tree's plan, and a variant beside it.
Runs the real tool end to end, small: its figures must count exactly the measured calls, not
the warm-up, and a variant must be measured as its own schema. And the failure path it shares
with bench/instructions (cluster.measured): a line and exit 1, the cluster's files kept."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO

sys.path.insert(0, str(REPO / "bench"))

from jobfence_bench import cluster  # noqa: E402

pytestmark = pytest.mark.skipif(shutil.which("sqitch") is None, reason="sqitch deploys the plan")


def test_statements_counts_the_measured_calls_and_tells_a_variant_apart(tmp_path):
    # A variant whose rollup does nothing: its tally must cost next to nothing, the plan's not.
    variant = tmp_path / "no_rollup.sql"
    variant.write_text(
        "CREATE OR REPLACE FUNCTION jobs.tally(kinds text[], reasons text[], expired boolean[] DEFAULT NULL,"
        " waits double precision[] DEFAULT NULL, runs double precision[] DEFAULT NULL,"
        " latencies double precision[] DEFAULT NULL, retries integer[] DEFAULT NULL, job_ids bigint[] DEFAULT NULL)"
        " RETURNS integer LANGUAGE sql AS 'SELECT 0';\n")
    out = subprocess.run([str(REPO / "bench" / "statements"), "--batch", "10", "--jobs", "100", "--json",
                          "--variant", str(variant)], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    figures = json.loads(out.stdout)
    plan, other = figures["databases"]["plan"], figures["databases"][str(variant)]
    # 100 jobs at 10 a call: 10 rounds, whatever the warm-up ran before the reset.
    calls = {f["function"]: f["calls"] for f in plan["functions"]}
    assert calls["submit_many"] == calls["claim_many_with_token"] == calls["complete_many"] == 10
    assert calls["tally"] == 30  # one per call: submitted, claimed, completed
    assert {s["query"] for s in plan["statements"] if s["toplevel"]} >= {
        "SELECT id FROM jobs.submit_many($1::jsonb)"}
    assert plan["calls_us_per_job"] > 0
    # The variant's rollup is a SQL function the plan never compiled: tracked as 'pl' only
    # when PL/pgSQL, so it leaves the variant's counts; the plan's tally is there.
    assert "tally" not in {f["function"] for f in other["functions"]}
    assert {f["function"] for f in other["functions"]} >= {"submit_many", "finish_leases", "grant_leases"}


def test_statements_refuses_bad_arguments_with_exit_2():
    out = subprocess.run([str(REPO / "bench" / "statements"), "--batch", "0"], cwd=REPO,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    assert "a batch is 1 to 10,000 jobs" in out.stderr
    assert "Traceback" not in out.stderr


class _Failing:
    """A cluster that fails as a broken variant does, after its files exist."""

    def __init__(self, work: Path, error: BaseException):
        self.work, self.port, self.error, self.stopped = work, 0, error, False

    def init(self) -> None:
        (self.work / "server.log").write_text("the server's log\n")
        raise self.error

    def stop(self) -> None:
        self.stopped = True


def test_a_failed_measure_says_why_and_keeps_the_cluster_for_a_look(tmp_path, capsys):
    # The path both tools share (bench/instructions and bench/statements): one line, no
    # traceback, None (the tool exits 1), the server stopped, its files kept.
    work = tmp_path / "cluster"
    work.mkdir()
    failing = _Failing(work, RuntimeError("variant broken.sql: function jobs.no_such_function() does not exist"))
    assert cluster.measured("bench/statements", failing, [], lambda dbs: dbs) is None
    err = capsys.readouterr().err
    assert "bench/statements: variant broken.sql: function jobs.no_such_function() does not exist" in err
    assert f"(the cluster's files are kept in {work})" in err
    assert failing.stopped and (work / "server.log").is_file()


def test_an_interrupted_measure_removes_the_cluster(tmp_path):
    work = tmp_path / "cluster"
    work.mkdir()
    failing = _Failing(work, KeyboardInterrupt())
    with pytest.raises(KeyboardInterrupt):
        cluster.measured("bench/statements", failing, [], lambda dbs: dbs)
    assert failing.stopped and not work.exists()
