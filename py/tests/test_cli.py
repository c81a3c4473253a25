"""The jobfence command: output, --json and the exit codes documented in docs/cli.md."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys

import psycopg
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
                            "--stale-after", "1", "--grace", "5", "--api-port", "0"],
                           cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        out = cli("demo", "--jobs", "300", "--crash", "1", "--timeout", "60", "--json",
                  timeout=90)
        assert out.returncode == 0, out.stderr
        summary = json.loads(out.stdout)
        counts = summary["counts"]
        assert counts.get("done", 0) + counts.get("failed", 0) == 300
        # The SLO line counts what the objective counts: ended jobs, from due, per kind.
        assert summary["ended"] == 300 and 0.0 <= summary["within_slo"] <= 1.0
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


BAD_IDS = ["-1", "0", "99999999999999999999999", "9223372036854775808", "abc", "1.5"]


@pytest.mark.parametrize("command", ["status", "cancel", "replay"])
def test_job_ids_must_be_positive_int64(cli, command):
    for bad in BAD_IDS:
        out = cli(command, bad)
        assert out.returncode == 2, (bad, out.stderr)
        assert "positive 64-bit integers" in out.stderr, (bad, out.stderr)
        assert "Traceback" not in out.stderr and "42883" not in out.stderr
    # The largest bigint is a valid id, just not an existing one.
    top = cli(command, str(2**63 - 1))
    assert top.returncode == 3, top.stderr
    assert "[JB002 job_not_found]" in top.stderr and "Traceback" not in top.stderr


def test_bad_submit_input_is_a_clean_error(cli, declared):
    for args, code in [(["--run-after", "1e30"], 2), (["--run-after", "-1e30"], 2),
                       (["--run-after", "nan"], 2), (["--run-after", "soon"], 2),
                       (["--payload", '{"a": "\\u0000"}'], 2), (["--payload", '{"\\u0000": 1}'], 2),
                       (["--payload", "null"], 5), (["--wait", "--timeout", "nan"], 2),
                       (["--wait", "--timeout", "-1"], 2),
                       # A zone offset PostgreSQL cannot read, alone or in a batch.
                       (["--run-after", "2030-01-01T00:00:00+16:00"], 2),
                       (["--run-after", "2030-01-01T00:00:00-16:00", "--count", "2"], 2)]:
        out = cli("submit", "noop", *args)
        assert out.returncode == code, (args, out.stderr)
        assert out.stderr.startswith(("Usage:", "Error:")), (args, out.stderr)
        assert "Traceback" not in out.stderr, (args, out.stderr)
    offset = cli("submit", "noop", "--run-after", "2030-01-01T00:00:00+16:00")
    assert "Invalid value for --run-after" in offset.stderr and "+-15:59" in offset.stderr, offset.stderr
    with psycopg.connect(declared, autocommit=True) as c:
        assert c.execute("SELECT count(*) FROM jobs.job").fetchone()[0] == 0


def test_numbers_beyond_the_double_range_and_bytes_that_are_not_utf8_exit_2_in_one_line(
        cli, declared):
    kind_not_utf8 = os.fsdecode(b"no\xffop")  # as Python reads such bytes from argv
    for args in (["noop", "--payload", '{"x": 1e5000}'],
                 ["noop", "--payload", '{"x": [-1' + "0" * 5000 + "]}"],
                 ["noop", "--payload", '{"x": 1' + "0" * 400 + "}"],
                 [kind_not_utf8], ["noop", "--ordering-key", kind_not_utf8]):
        out = cli("submit", *args)
        assert out.returncode == 2, (args[:2], out.stderr[-500:])
        assert "Traceback" not in out.stderr, out.stderr[-2000:]
        lines = out.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("Error: invalid "), out.stderr
        assert len(lines[0]) < 400, lines[0]
    assert "double range" in cli("submit", "noop", "--payload", '{"x": 1e5000}').stderr
    assert "\\xff" in cli("submit", kind_not_utf8).stderr
    with psycopg.connect(declared, autocommit=True) as c:
        assert c.execute("SELECT count(*) FROM jobs.job").fetchone()[0] == 0


def test_status_shows_a_stored_value_python_cannot_decode_as_its_text(cli, declared):
    job_id = json.loads(cli("submit", "noop", "--json").stdout)["id"]
    with psycopg.connect(declared, autocommit=True) as c:
        c.execute("""UPDATE jobs.job SET payload = '{"x": 1e5000}' WHERE id = %s""", (job_id,))
    out = cli("status", str(job_id))
    assert out.returncode == 0 and not out.stderr, out.stderr[-2000:]
    assert re.search(r'^payload\s+\{"x": 10{5000}\}$', out.stdout, re.M), out.stdout[:500]
    as_json = cli("status", str(job_id), "--json")
    assert as_json.returncode == 0, as_json.stderr[-2000:]
    assert json.loads(as_json.stdout)["payload"] == '{"x": 1' + "0" * 5000 + "}"
    listed = cli("jobs", "--json")
    assert listed.returncode == 0, listed.stderr[-2000:]


def test_not_found_errors_carry_their_sqlstate(cli):
    for command in ("status", "cancel", "replay"):
        out = cli(command, "999999")
        assert out.returncode == 3
        assert out.stderr.rstrip().endswith("[JB002 job_not_found]"), out.stderr


def test_status_shows_attempts_unambiguously(cli, client):
    client.db.define_type("one_shot", lease_timeout=2.0, timeout=30.0, max_retries=0)
    job_id = client.submit("one_shot")
    (lease,) = client.db.claim_many([job_id], "t")
    assert client.db.fail(job_id, "t", lease.lease_version, "boom").status == "failed"
    out = cli("status", str(job_id), "--no-events")
    assert out.returncode == 0, out.stderr
    assert re.search(r"^attempts\s+1 \(1 failed, max retries 0, so at most 1\)$", out.stdout,
                     re.M), out.stdout
    assert "retries 1 of 0" not in out.stdout


def test_help_names_every_documented_environment_variable(cli):
    doc = (REPO / "docs" / "cli.md").read_text()
    table = doc.split("## Global options and environment", 1)[1].split("\n\n", 2)[1]
    documented = set(re.findall(r"`(JOBFENCE_[A-Z_]+)`", table))
    assert "JOBFENCE_LOG_LEVEL" in documented
    out = cli("--help")
    assert out.returncode == 0
    help_text = re.sub(r"\s+", " ", out.stdout)
    for name in sorted(documented):
        assert name in help_text, name


def test_documented_unknown_kind_error_is_the_real_output(cli):
    out = cli("submit", "nosuchkind")
    assert out.returncode == 5
    doc = (REPO / "docs" / "cli.md").read_text()
    block = doc.split("$ jobfence submit nosuchkind\n", 1)[1].split("\n", 1)[0]
    shown = block.split("     # exit")[0].rstrip()
    assert shown == out.stderr.strip()
    assert "# exit 5" in block


def test_invalid_parameter_prints_the_server_message_and_hint(cli, declared):
    # A JSON array payload is refused by jobs.submit with 22023 (independent of newer checks).
    with psycopg.connect(declared, autocommit=True) as c:
        with pytest.raises(psycopg.Error) as caught:
            c.execute("SELECT jobs.submit(kind => 'noop', payload => '[1, 2]'::jsonb)")
    diag = caught.value.diag
    assert caught.value.sqlstate == "22023"
    out = cli("submit", "noop", "--payload", "[1, 2]")
    assert out.returncode == 5
    expected = f"invalid: {diag.message_primary}"
    if diag.message_hint:
        expected += f" (HINT: {diag.message_hint})"
    assert f"Error: {expected} [22023 invalid_parameter_value]" in out.stderr, out.stderr


def test_server_errors_outside_the_registry_print_postgresql_condition_names(cli, declared):
    # docs/cli.md: "[SQLSTATE name]" with PostgreSQL's condition name, the form of the
    # registry's own codes ([22023 invalid_parameter_value]), never a driver's class name.
    from role_helpers import login_role, url_as

    with login_role(declared, "jobs_producer") as producer:
        out = cli("--database-url", url_as(declared, producer), "replay-many", "--kind", "noop")
    assert out.returncode == 1, out.stderr
    assert "[42501 insufficient_privilege]" in out.stderr and "Insufficient" not in out.stderr
    from jobfence.cli.common import server_error

    with psycopg.connect(declared, autocommit=True) as c:
        for statement, tag in (("SELECT 'xy' LIKE 'x\\'", "[22025 invalid_escape_sequence]"),
                               ("SELECT 1 / 0", "[22012 division_by_zero]"),
                               ("SELECT * FROM no_such_table", "[42P01 undefined_table]")):
            with pytest.raises(psycopg.Error) as raised:
                c.execute(statement)
            assert server_error(raised.value).endswith(tag), server_error(raised.value)


def test_every_postgresql_sqlstate_has_its_condition_name():
    from pathlib import Path

    from jobfence.sqlstates import condition_name

    tables = sorted(Path("/usr/share/postgresql").glob("*/errcodes.txt"))
    if not tables:
        pytest.skip("PostgreSQL's errcodes.txt is not installed here")
    named = 0
    for line in tables[-1].read_text().splitlines():
        fields = line.split()
        if len(fields) == 4 and not line.startswith(("#", "Section")):
            assert condition_name(fields[0]) == fields[3], fields
            named += 1
    assert named > 250
    # A code PostgreSQL does not define (an application's own RAISE) has no name to print.
    assert condition_name("U0001") is None
