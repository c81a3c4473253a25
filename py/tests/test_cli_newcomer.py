"""What a newcomer meets first on the command line: payloads from files and stdin, a
negative --run-after, listing jobs, the demo's rates, and --app mistakes (docs/cli.md)."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys

import pytest

from jobfence.app import AppLoadError, load_app

from conftest import REPO


@pytest.fixture
def cli(declared, redis_url):
    env = dict(os.environ, JOBFENCE_DATABASE_URL=declared, JOBFENCE_REDIS_URL=redis_url)

    def run(*args, stdin=None, cwd=REPO, timeout=60):
        return subprocess.run([sys.executable, "-m", "jobfence", *args], cwd=cwd, env=env,
                              input=stdin, capture_output=True, text=True, timeout=timeout)
    return run


def test_payload_from_a_file_reaches_the_size_limit_that_a_command_line_cannot(cli, tmp_path):
    # Above what one argument may hold on Linux (128 KiB), below the kind's 256 KiB limit.
    big = {"blob": "x" * 200_000}
    path = tmp_path / "payload.json"
    path.write_text(json.dumps(big))
    out = cli("submit", "noop", "--payload", f"@{path}", "--json")
    assert out.returncode == 0, out.stderr
    shown = cli("status", str(json.loads(out.stdout)["id"]), "--json", "--no-events")
    assert json.loads(shown.stdout)["payload"] == big

    # Past the limit: the server's JB004 and its hint are now reachable from the CLI.
    path.write_text(json.dumps({"blob": "x" * 300_000}))
    refused = cli("submit", "noop", "--payload", f"@{path}")
    assert refused.returncode == 5 and "JB004" in refused.stderr


def test_payload_from_stdin(cli):
    out = cli("submit", "noop", "--payload", "-", "--json", stdin='{"from": "stdin"}')
    assert out.returncode == 0, out.stderr
    shown = cli("status", str(json.loads(out.stdout)["id"]), "--json", "--no-events")
    assert json.loads(shown.stdout)["payload"] == {"from": "stdin"}


def test_unreadable_payload_file_is_a_usage_error(cli, tmp_path):
    out = cli("submit", "noop", "--payload", f"@{tmp_path / 'missing.json'}")
    assert out.returncode == 2
    assert "cannot read" in out.stderr and "Traceback" not in out.stderr


@pytest.mark.parametrize("when", ["-5", "nan", "inf"])
def test_negative_or_non_finite_run_after_is_a_usage_error(cli, conn, when):
    out = cli("submit", "noop", "--run-after", when)
    assert out.returncode == 2, out.stdout + out.stderr
    assert "--run-after" in out.stderr and "Traceback" not in out.stderr
    assert conn.execute("SELECT count(*) FROM jobs.job").fetchone()[0] == 0


def test_jobs_lists_newest_first_with_filters_and_keyset_pages(cli, conn):
    conn.execute("SELECT jobs.define_type('listed.elsewhere', queue => 'elsewhere')")
    ids = [json.loads(cli("submit", "noop", "--json").stdout)["id"] for _ in range(5)]
    other = json.loads(cli("submit", "listed.elsewhere", "--json").stdout)["id"]

    page = json.loads(cli("jobs", "--kind", "noop", "--limit", "3", "--json").stdout)
    assert [j["id"] for j in page["jobs"]] == ids[:1:-1]
    assert page["next_before"] == ids[2]
    rest = json.loads(cli("jobs", "--kind", "noop", "--limit", "3", "--before", str(page["next_before"]),
                          "--json").stdout)
    assert [j["id"] for j in rest["jobs"]] == [ids[1], ids[0]] and rest["next_before"] is None

    by_queue = json.loads(cli("jobs", "--queue", "elsewhere", "--json").stdout)
    assert [j["id"] for j in by_queue["jobs"]] == [other]
    assert json.loads(cli("jobs", "--status", "done", "--json").stdout)["jobs"] == []

    human = cli("jobs", "--limit", "2")
    assert human.returncode == 0
    assert human.stdout.splitlines()[0].split()[:4] == ["id", "kind", "queue", "status"]
    assert f"next page: --before {ids[4]}" in human.stderr

    bad = cli("jobs", "--status", "nosuch")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr


def test_demo_that_times_out_says_it_is_unfinished_and_claims_no_rate_for_unfinished_jobs(cli):
    # No worker runs: nothing can finish within the timeout.
    out = cli("demo", "--jobs", "5", "--crash", "0", "--timeout", "1", "--json")
    assert out.returncode == 8
    summary = json.loads(out.stdout)
    assert summary["finished"] is False and summary["terminal"] == 0
    assert summary["jobs_per_second"] == 0.0
    assert summary["ended"] == 0 and summary["within_slo"] is None  # no job ended: no figure
    human = cli("demo", "--jobs", "5", "--crash", "0", "--timeout", "1")
    assert human.returncode == 8 and "unfinished: 0 of 5 jobs terminal" in human.stdout


@pytest.mark.parametrize("ref, says", [
    ("mymodule", "must look like MODULE:ATTR"),
    ("nosuch_module_here:app", "no module named 'nosuch_module_here'"),
    ("jobfence.examples:nope", "has no attribute 'nope'"),
    ("jobfence.examples:EFFECT_TABLE", "is a str, not a jobfence.App"),
])
def test_load_app_names_what_is_wrong(ref, says):
    with pytest.raises(AppLoadError, match=says):
        load_app(ref)


def test_load_app_finds_a_module_in_the_working_directory_and_names_its_import_error(tmp_path, monkeypatch):
    (tmp_path / "newcomer_jobs.py").write_text(
        "import jobfence\napp = jobfence.App('newcomer')\n"
        "@app.task('hello')\ndef hello(job_id, payload, ctx):\n    return {'hi': 1}\n")
    (tmp_path / "broken_jobs.py").write_text("import nosuch_dependency_xyz\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    assert "hello" in load_app("newcomer_jobs:app").tasks
    with pytest.raises(AppLoadError, match="importing broken_jobs failed: No module named 'nosuch_dependency_xyz'"):
        load_app("broken_jobs:app")


@pytest.mark.parametrize("command", ["worker", "run"])
@pytest.mark.parametrize("ref, says", [
    ("mymodule", "must look like MODULE:ATTR"),
    ("nosuch.module:app", "no module named 'nosuch'"),
    ("jobfence.examples:nope", "has no attribute 'nope'"),
])
def test_an_app_mistake_is_one_line_and_exit_2(cli, command, ref, says):
    out = cli(command, "--app", ref, timeout=30)
    assert out.returncode == 2, out.stderr
    assert says in out.stderr and "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


def test_worker_finds_an_app_module_in_its_working_directory(cli, tmp_path):
    (tmp_path / "newcomer_mod.py").write_text(
        "import jobfence\napp = jobfence.App('newcomer')\n"
        "@app.task('newcomer.hello')\ndef hello(job_id, payload, ctx):\n    return {}\n")
    out = cli("worker", "--app", "newcomer_mod:app", "--declare-only", cwd=tmp_path, timeout=60)
    assert out.returncode == 0, out.stderr
    elsewhere = cli("worker", "--app", "newcomer_mod:app", "--declare-only", timeout=60)
    assert elsewhere.returncode == 2 and "--app-dir" in elsewhere.stderr
    via_flag = cli("worker", "--app", "newcomer_mod:app", "--app-dir", str(tmp_path), "--declare-only",
                   timeout=60)
    assert via_flag.returncode == 0, via_flag.stderr


def test_status_of_an_unknown_id_with_json_prints_a_json_error(cli):
    out = cli("status", "999999", "--json")
    assert out.returncode == 3
    error = json.loads(out.stdout)["error"]
    assert error["exit_code"] == 3 and error["sqlstate"] == "JB002" and "not found" in error["message"]


def test_a_database_without_the_schema_names_the_command_that_deploys_it(cli, tmp_path):
    import psycopg

    from conftest import ADMIN_URL

    name = f"jobfence_noschema_{os.getpid()}"
    with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}"')
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        url = ADMIN_URL.rsplit("/", 1)[0] + "/" + name
        out = subprocess.run([sys.executable, "-m", "jobfence", "--database-url", url, "status", "1"],
                             cwd=REPO, capture_output=True, text=True, timeout=60)
        assert out.returncode == 1, out.stderr
        assert "jobfence db deploy" in out.stderr and "Traceback" not in out.stderr
    finally:
        with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_a_repeated_idempotency_key_says_it_is_an_existing_job(cli, conn):
    first = cli("submit", "noop", "--idempotency-key", "order:7", "--json")
    assert first.returncode == 0, first.stderr
    made = json.loads(first.stdout)
    assert made["created"] is True
    again = cli("submit", "noop", "--idempotency-key", "order:7", "--json")
    assert json.loads(again.stdout) == {"id": made["id"], "created": False}
    human = cli("submit", "noop", "--idempotency-key", "order:7")
    assert human.returncode == 0
    assert human.stdout.startswith(f"existing noop job {made['id']}: idempotency key 'order:7' was used before")
    assert conn.execute("SELECT count(*) FROM jobs.job").fetchone()[0] == 1


def test_status_of_a_job_that_succeeded_after_a_failure_labels_the_old_error(cli, conn):
    conn.execute("SELECT jobs.define_type('relabel', max_retries => 0)")
    job_id = conn.execute("SELECT id FROM jobs.submit('relabel', '{}')").fetchone()[0]
    conn.execute("SELECT * FROM jobs.claim(%s, 'w1')", (job_id,))
    conn.execute("SELECT * FROM jobs.fail(%s, 'w1', 1, 'boom', false)", (job_id,))
    conn.execute("SELECT jobs.replay(%s)", (job_id,))
    (version,), = conn.execute("SELECT lease_version FROM jobs.claim(%s, 'w1')", (job_id,)).fetchall()
    conn.execute("SELECT * FROM jobs.complete(%s, 'w1', %s, '{}')", (job_id, version))
    out = cli("status", str(job_id), "--no-events")
    assert out.returncode == 0
    line = next(l for l in out.stdout.splitlines() if l.startswith("error"))
    assert "boom" in line and "an earlier attempt's; the job then succeeded" in line
    # The row itself is unchanged: --json shows the stored error as it is.
    assert json.loads(cli("status", str(job_id), "--json", "--no-events").stdout)["error"] == "boom"


@pytest.mark.parametrize("url, target, password", [
    ("postgresql://owner:p%40ss@db.example:5433/app?sslmode=require",
     "postgresql://owner@db.example:5433/app?sslmode=require", "p@ss"),
    ("postgresql://owner@db.example/app", "postgresql://owner@db.example/app", None),
    ("postgresql://owner:pw@[::1]:5432/app", "postgresql://owner@[::1]:5432/app", "pw"),
])
def test_db_commands_hand_sqitch_the_password_in_the_environment_not_on_its_command_line(url, target, password):
    from jobfence.cli.schema import _without_password

    shown, env = _without_password(url)
    assert shown == target
    assert env.get("PGPASSWORD") == password or (password is None and "PGPASSWORD" not in env
                                                  or env.get("PGPASSWORD") == os.environ.get("PGPASSWORD"))


def _missing_database_url() -> str:
    from conftest import ADMIN_URL

    return ADMIN_URL.rsplit("/", 1)[0] + f"/jobfence_missing_{os.getpid()}"


def test_a_missing_database_is_named_in_the_one_line_error(cli):
    out = subprocess.run([sys.executable, "-m", "jobfence", "--database-url", _missing_database_url(),
                          "status", "1"], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert out.returncode == 6
    assert "does not exist" in out.stderr and len(out.stderr.strip().splitlines()) == 1, out.stderr


@pytest.mark.parametrize("command", [["status", "1"], ["worker", "--app", "jobfence.examples:app"], ["reaper"]])
def test_a_malformed_database_url_is_a_usage_error_at_once(command):
    out = subprocess.run([sys.executable, "-m", "jobfence", "--database-url",
                          "postgresql://127.0.0.1:5432/x?no_such_option=1", *command],
                         cwd=REPO, capture_output=True, text=True, timeout=30)
    assert out.returncode == 2, out.stderr
    assert "invalid database URL" in out.stderr and "Traceback" not in out.stderr


def _first_events(argv: list[str], until: str, deadline: float = 30.0) -> list[dict]:
    """The JSON log lines of a process until one has event ``until`` (then it is stopped)."""
    import time

    proc = subprocess.Popen([sys.executable, "-m", "jobfence", "--log-format", "json",
                             "--database-url", _missing_database_url(), *argv],
                            cwd=REPO, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    seen: list[dict] = []
    try:
        ends = time.monotonic() + deadline
        while time.monotonic() < ends:
            line = proc.stderr.readline()
            if not line:
                break
            try:
                seen.append(json.loads(line))
            except ValueError:
                continue
            if seen[-1].get("event") == until:
                break
    finally:
        proc.terminate()
        rest, _ = proc.communicate(timeout=30)
    for line in (rest or "").splitlines():
        with contextlib.suppress(ValueError):
            seen.append(json.loads(line))
    return seen


def test_a_worker_says_at_once_why_it_cannot_reach_postgres():
    # A database that does not exist will not appear by waiting: said once, in libpq's words.
    seen = _first_events(["worker", "--app", "jobfence.examples:app"], "db_refused")
    first = next(e for e in seen if e.get("event") == "db_refused")
    assert "does not exist" in first["msg"]


def test_the_reaper_is_not_ready_before_postgres_answers():
    seen = _first_events(["reaper", "--interval", "0.5"], "db_refused")
    assert any(e.get("event") == "db_refused" and "does not exist" in e["msg"] for e in seen)
    assert not any(e.get("event") == "reaper_ready" for e in seen), seen


@pytest.mark.parametrize("command", [["status", "1"], ["worker", "--app", "jobfence.examples:app"],
                                     ["reaper"], ["relay"], ["run", "--no-api"]])
def test_a_malformed_redis_url_is_one_line_and_exit_2(cli, command):
    out = subprocess.run([sys.executable, "-m", "jobfence", "--redis-url", "bogus://x", *command],
                         cwd=REPO, capture_output=True, text=True, timeout=30)
    assert out.returncode == 2, out.stderr
    assert "Redis URL" in out.stderr and "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("command", [["worker", "--app", "jobfence.examples:app"],
                                     ["worker", "--app", "jobfence.examples:app", "--no-declare"],
                                     ["reaper"], ["relay"], ["run", "--no-api"]])
def test_a_process_on_a_database_without_the_schema_says_so_once(command):
    from conftest import ADMIN_URL

    out = subprocess.run([sys.executable, "-m", "jobfence", "--database-url", ADMIN_URL, *command],
                         cwd=REPO, capture_output=True, text=True, timeout=60)
    assert out.returncode == 1, out.stderr
    assert "jobfence db deploy" in out.stderr and "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


def test_an_app_without_tasks_is_a_usage_error(cli, tmp_path):
    (tmp_path / "empty_app.py").write_text("import jobfence\napp = jobfence.App()\n")
    out = cli("worker", "--app", "empty_app:app", cwd=tmp_path, timeout=30)
    assert out.returncode == 2 and "declares no task" in out.stderr and "Traceback" not in out.stderr
    both = cli("worker", "--app", "jobfence.examples:app", "--declare-only", "--no-declare", timeout=30)
    assert both.returncode == 2 and "contradict" in both.stderr


@pytest.mark.parametrize("option, url", [
    ("--redis-url", "redis://127.0.0.1:99999/0"), ("--redis-url", "redis://127.0.0.1:6379/abc"),
    ("--database-url", "postgresql://root@127.0.0.1:abc/x"), ("--database-url", "postgresql://root@127.0.0.1:99999/x"),
])
def test_a_url_with_a_bad_port_or_database_number_is_a_usage_error(option, url):
    out = subprocess.run([sys.executable, "-m", "jobfence", option, url, "status", "1"],
                         cwd=REPO, capture_output=True, text=True, timeout=30)
    assert out.returncode == 2, out.stderr
    assert "invalid" in out.stderr and "URL" in out.stderr and "Traceback" not in out.stderr


@pytest.mark.parametrize("payload", ['{"a": NaN}', '{"a": 1e999}', '{"a": -Infinity}'])
def test_numbers_jsonb_cannot_hold_are_not_json_on_the_command_line(cli, conn, payload):
    out = cli("submit", "noop", "--payload", payload)
    # NaN and Infinity are not JSON; 1e999 is, but beyond what any reader can decode.
    assert out.returncode == 2 and ("not JSON" in out.stderr or "IEEE-754" in out.stderr), out.stderr
    assert "Traceback" not in out.stderr
    assert conn.execute("SELECT count(*) FROM jobs.job").fetchone()[0] == 0


def test_a_payload_over_what_the_cli_sends_is_refused_before_it_is_sent(cli, conn, tmp_path):
    path = tmp_path / "huge.json"
    path.write_text('{"x": "' + "a" * (17 * 1024 * 1024) + '"}')
    out = cli("submit", "noop", "--payload", f"@{path}", "--json")
    assert out.returncode == 5 and "16 MiB" in out.stderr
    assert json.loads(out.stdout)["error"]["exit_code"] == 5
    assert conn.execute("SELECT count(*) FROM jobs.job").fetchone()[0] == 0


def test_a_refusal_of_the_command_itself_is_json_on_stdout_too(cli):
    out = cli("submit", "noop", "--payload", "null", "--json")
    assert out.returncode == 5
    assert json.loads(out.stdout)["error"]["exit_code"] == 5


def test_jobs_counts_attempts_as_status_does_and_offers_a_next_page_only_when_there_is_one(cli, conn):
    ids = [json.loads(cli("submit", "noop", "--json").stdout)["id"] for _ in range(2)]
    conn.execute("SELECT * FROM jobs.claim(%s, 'w1')", (ids[0],))
    conn.execute("SELECT * FROM jobs.complete(%s, 'w1', 1, '{}')", (ids[0],))
    page = json.loads(cli("jobs", "--limit", "2", "--json").stdout)
    assert page["next_before"] is None
    human = cli("jobs", "--limit", "2")
    assert "next page" not in human.stderr
    done_row = next(l for l in human.stdout.splitlines() if l.startswith(str(ids[0])))
    assert done_row.split()[4] == "1"   # one attempt, the successful one
