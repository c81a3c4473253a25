"""jobfence stats and jobfence top against a real database (docs/observability.md, cli.md)."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
import uuid

import psycopg
import pytest

from jobfence.dashboard import RateTracker, Reader, Snapshot

from conftest import ADMIN_URL, REPO, wait_until


@pytest.fixture
def work(conn, clean_db):
    """Two kinds with known figures, made through the jobs.* functions:

    probe (default queue, timeout 10 s): 3 submitted, 1 done, 1 dead letter, 1 ready.
    other (queue billing, a 1 ms latency SLO no job can meet): 3 submitted, 1 done (late),
    1 in flight, 1 delayed by an hour.
    """
    q = lambda text, *args: conn.execute(text, args).fetchall()  # noqa: E731
    q("SELECT jobs.define_type('probe', timeout => '10 s')")
    q("SELECT jobs.define_type('other', queue => 'billing', slo_latency => '0.001 s')")
    ids = {}
    for name in ("p1", "p2", "p3"):
        ids[name] = q("SELECT id FROM jobs.submit('probe', '{}', notify => false)")[0][0]
    for name in ("o1", "o2"):
        ids[name] = q("SELECT id FROM jobs.submit('other', '{}', notify => false)")[0][0]
    ids["o3"] = q("SELECT id FROM jobs.submit('other', '{}', notify => false, "
                  "run_after => now() + interval '1 hour')")[0][0]
    for name in ("p1", "p2", "o1", "o2"):
        assert q("SELECT job_id FROM jobs.claim(%s, 'w')", ids[name]), name
    assert q("SELECT accepted FROM jobs.complete(%s, 'w', 1)", ids["p1"])[0][0]
    assert q("SELECT accepted FROM jobs.fail(%s, 'w', 1, 'boom', false)", ids["p2"])[0][0]
    # Each statement is its own transaction, so now() moves on: o1 ends well past 1 ms.
    q("SELECT pg_sleep(0.02)")
    assert q("SELECT accepted FROM jobs.complete(%s, 'w', 1)", ids["o1"])[0][0]
    return ids


@pytest.fixture
def jobfence(clean_db):
    env = dict(os.environ, JOBFENCE_DATABASE_URL=clean_db)

    def run(*args, timeout=60):
        return subprocess.run([sys.executable, "-m", "jobfence", *args], cwd=REPO, env=env,
                              capture_output=True, text=True, timeout=timeout)
    return run


def _by(rows, *keys):
    return {tuple(r[k] for k in keys) if len(keys) > 1 else r[keys[0]]: r for r in rows}


# -- stats --------------------------------------------------------------------------------------
def test_stats_json_reports_queue_depth_and_metrics(work, jobfence):
    out = jobfence("stats", "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["since_seconds"] == 3600.0
    depth = _by(data["queue_depth"], "queue", "kind")
    assert set(depth) == {("default", "probe"), ("billing", "other")}
    probe_q, other_q = depth["default", "probe"], depth["billing", "other"]
    assert (probe_q["queued_ready"], probe_q["queued_delayed"], probe_q["queued_blocked"],
            probe_q["processing"], probe_q["enqueue_failed"]) == (1, 0, 0, 0, 0)
    assert probe_q["oldest_ready_age"] >= 0
    assert (other_q["queued_ready"], other_q["queued_delayed"], other_q["processing"],
            other_q["processing_expired"]) == (0, 1, 1, 0)
    assert other_q["oldest_ready_age"] is None

    metrics = _by(data["metrics"], "kind")
    assert set(metrics) == {"probe", "other"}
    probe, other = metrics["probe"], metrics["other"]
    assert (probe["submitted"], probe["started"], probe["succeeded"], probe["failed"],
            probe["dead_lettered"]) == (3, 2, 1, 1, 1)
    assert probe["success_rate"] == 0.5 and probe["slo_attainment"] == 1.0
    # numeric and interval columns come out as JSON numbers, not strings.
    assert probe["slo_target"] == 0.95 and probe["run_time_budget"] == 5.0  # half the timeout
    assert isinstance(probe["run_p95"], float) and probe["run_p95"] > 0
    assert probe["window_seconds"] > 0 and probe["window_start"].startswith("20")
    assert (other["submitted"], other["succeeded"], other["failed"]) == (3, 1, 0)
    assert other["slo_latency"] == 0.001 and other["slo_attainment"] == 0.0
    assert other["error_budget_remaining"] < 0
    assert other["latency_p95"] > other["slo_latency"]


def test_stats_table_shows_kinds_counts_and_breaches(work, jobfence):
    out = jobfence("stats", "--since", "120")
    assert out.returncode == 0, out.stderr
    text = out.stdout
    lines = text.splitlines()
    assert lines[0] == "queues (now)"
    assert re.search(r"^queue\s+kind\s+backlog\s+ready\s+delayed\s+blocked\s+in flight\s+expired"
                     r"\s+enqueue failed\s+oldest ready$", text, re.M), text
    # queue, kind, backlog, ready, delayed, blocked, in flight, expired, enqueue failed
    assert re.search(r"^default\s+probe\s+1\s+1\s+0\s+0\s+0\s+0\s+0\s+\S+$", text, re.M), text
    assert re.search(r"^billing\s+other\s+1\s+0\s+1\s+0\s+1\s+0\s+0\s+-$", text, re.M), text
    assert re.search(r"^kinds over the last 2m00s \(whole minutes from ", text, re.M), text
    # kind, submitted, succeeded, failed, dead, ok/s, run p95/budget, latency p95/slo,
    # slo met/target, budget left, success; ! marks what is out of bounds.
    assert re.search(r"^probe\s+3\s+1\s+1!\s+1!\s+\S+\s+\S+/5s\s+\S+/25s\s+100\.0%/95%\s+100\.0%"
                     r"\s+50\.0%!$", text, re.M), text
    assert re.search(r"^other\s+3\s+1\s+0\s+0\s+\S+\s+\S+/15s\s+\S+/1ms!\s+0\.0%/95%!\s+-\S+%!"
                     r"\s+100\.0%$", text, re.M), text
    assert "! outside its objective or alert bound" in text


def test_stats_on_an_idle_database_and_a_clean_one(clean_db, jobfence):
    out = jobfence("stats")
    assert out.returncode == 0, out.stderr
    assert "no queues and no declared kinds" in out.stdout and "no kinds" in out.stdout
    assert "!" not in out.stdout
    data = json.loads(jobfence("stats", "--json").stdout)
    assert data["queue_depth"] == [] and data["metrics"] == []


def test_stats_errors_use_the_documented_exit_codes(clean_db, jobfence):
    for bad in ("0", "-5", "nan", "soon"):
        out = jobfence("stats", "--since", bad)
        assert out.returncode == 2, (bad, out.stderr)
    # Beyond the 400 days jobs.metrics reads: the server refuses it (22023).
    too_long = jobfence("stats", "--since", str(401 * 86400))
    assert too_long.returncode == 5 and "22023" in too_long.stderr, too_long.stderr
    down = jobfence("--database-url", "postgresql://127.0.0.1:1/none", "stats", "--json")
    assert down.returncode == 6 and "PostgreSQL unavailable" in down.stderr
    # --json: the error as JSON on stdout too (docs/cli.md, exit codes).
    assert json.loads(down.stdout)["error"]["exit_code"] == 6
    # A database without the jobs schema: a server error, on one line.
    bare = jobfence("--database-url", ADMIN_URL, "stats")
    assert bare.returncode == 1 and "42P01" in bare.stderr, bare.stderr
    assert "jobfence db deploy" in bare.stderr
    for out in (too_long, down, bare):
        assert "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) <= 2


# -- rates --------------------------------------------------------------------------------------
def test_rates_between_snapshots_are_the_counts_that_moved(work, conn, clean_db):
    with Reader(clean_db) as reader:
        for _ in range(3):
            tracker = RateTracker()
            before = reader.read(300)
            first = tracker.update(before)
            # The first snapshot has nothing to subtract: the window's average.
            assert not first["probe"].between
            assert first["probe"].succeeded == pytest.approx(1 / before.metrics[0]["window_seconds"],
                                                             rel=0.5)
            conn.execute("SELECT jobs.claim(%s, 'w')", (work["p3"],))
            conn.execute("SELECT jobs.complete(%s, 'w', 1)", (work["p3"],))
            after = reader.read(300)
            rates = tracker.update(after)
            starts = {r["window_start"] for r in before.metrics + after.metrics}
            if len(starts) == 1:
                break
            # The window slid to the next minute between the two reads: do it again.
            conn.execute("SELECT jobs.replay(%s)", (work["p3"],))
        else:
            pytest.fail("three minute boundaries in a row")
    elapsed = after.monotonic - before.monotonic
    assert rates["probe"].between
    assert rates["probe"].succeeded == pytest.approx(1 / elapsed)
    assert rates["probe"].submitted == 0 and rates["probe"].failed == 0
    assert rates["other"].succeeded == 0


def test_rates_survive_the_window_sliding():
    def snap(start, succeeded, at):
        row = {"kind": "k", "window_start": start, "window_seconds": 60.0,
               "submitted": succeeded, "succeeded": succeeded, "failed": 0}
        return Snapshot(since=60, depth=[], metrics=[row], monotonic=at)

    tracker = RateTracker()
    tracker.update(snap("10:00", 10, 100.0))
    assert tracker.update(snap("10:00", 30, 102.0))["k"].succeeded == 10.0
    # The oldest minute dropped out: the counts cannot be subtracted, the last rate stays.
    slid = tracker.update(snap("10:01", 5, 104.0))["k"]
    assert slid.succeeded == 10.0 and slid.between
    assert tracker.update(snap("10:01", 9, 106.0))["k"].succeeded == 2.0


# -- top ----------------------------------------------------------------------------------------
def test_top_refuses_without_a_terminal(clean_db, jobfence):
    out = jobfence("top")
    assert out.returncode == 2 and "needs a terminal" in out.stderr
    assert "jobfence stats" in out.stderr and "Traceback" not in out.stderr
    bad = jobfence("top", "--interval", "0.01")
    assert bad.returncode == 2


class Tmux:
    """One private tmux server running an interactive shell in a 200x50 pane."""

    def __init__(self, env: dict, rcfile):
        self.socket = f"jobfence-test-{uuid.uuid4().hex[:10]}"
        self.tmux = shutil.which("tmux")
        # A fixed prompt, so that being back at the shell is visible on the screen (an
        # interactive bash sets PS1 itself, so it cannot come from the environment).
        rcfile.write_text("PS1='shell$ '\n")
        self._run("-f", "/dev/null", "new-session", "-d", "-s", "t", "-x", "200", "-y", "50",
                  "-c", str(REPO), *[a for k, v in env.items() for a in ("-e", f"{k}={v}")],
                  f"bash --noprofile --rcfile {shlex.quote(str(rcfile))}")

    def _run(self, *args) -> str:
        done = subprocess.run([self.tmux, "-L", self.socket, *args], capture_output=True,
                              text=True, timeout=20)
        assert done.returncode == 0, done.stderr
        return done.stdout

    def type(self, line: str) -> None:
        self._run("send-keys", "-t", "t", "-l", line)
        self._run("send-keys", "-t", "t", "Enter")

    def key(self, key: str) -> None:
        self._run("send-keys", "-t", "t", key)

    def screen(self) -> str:
        return self._run("capture-pane", "-p", "-t", "t")

    def pane(self, fmt: str) -> str:
        return self._run("display-message", "-p", "-t", "t", fmt).strip()

    def wait_for(self, *patterns: str, timeout: float = 20.0) -> str:
        """Poll the screen until it matches every pattern at once (a frame caught while it
        is being drawn holds only its first lines); fail with the last screen at the
        deadline."""
        deadline = time.monotonic() + timeout
        while True:
            screen = self.screen()
            if all(re.search(p, screen, re.M) for p in patterns):
                return screen
            if time.monotonic() > deadline:
                pytest.fail(f"timed out after {timeout}s waiting for the screen to match "
                            f"{patterns!r}; it shows:\n{screen}")
            time.sleep(0.05)

    def kill(self) -> None:
        subprocess.run([self.tmux, "-L", self.socket, "kill-server"], capture_output=True,
                       timeout=20)


@pytest.fixture
def tmux(clean_db, tmp_path):
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed (scripts/setup installs it): top needs a terminal")
    t = Tmux({"JOBFENCE_DATABASE_URL": clean_db}, tmp_path / "bashrc")
    try:
        yield t
    finally:
        t.kill()


TOP = f"{shlex.quote(sys.executable)} -m jobfence top --interval 0.3"
PROBE_ROW = r"^\s*default\s+probe\s+{backlog}\s+{backlog}\s+0\s+0\s+0\s+0\s+0\s"
# kind, backlog, in flight, in/s, ok/s, failed/s, dead, run p95/budget
PROBE_KIND = r"^\s*probe\s+{backlog}\s+0\s+\S+\s+\S+\s+\S+\s+1\s+\S+/5s\s"


def test_top_shows_live_figures_and_quits_on_q(work, conn, tmux):
    tmux.wait_for(r"^shell\$")
    tmux.type(f"{TOP}; echo top-exited-$?")
    billing = r"^\s*billing\s+other\s+1\s+0\s+1\s+0\s+1\s"
    screen = tmux.wait_for(PROBE_ROW.format(backlog=1), PROBE_KIND.format(backlog=1), billing)
    assert "queues (now)" in screen and "kinds over the last 5m00s" in screen
    assert tmux.pane("#{alternate_on}") == "1"
    # It refreshes: the last ready probe job is done a moment later.
    conn.execute("SELECT jobs.claim(%s, 'w')", (work["p3"],))
    conn.execute("SELECT jobs.complete(%s, 'w', 1)", (work["p3"],))
    tmux.wait_for(PROBE_KIND.format(backlog=0))
    tmux.key("q")
    screen = tmux.wait_for(r"^top-exited-\d+$")
    assert re.search(r"^top-exited-0$", screen, re.M), screen
    wait_until(lambda: tmux.pane("#{alternate_on}") == "0", 10, what="the main screen back")
    screen = tmux.wait_for(r"^top-exited-0\nshell\$ ?$")
    assert "queues (now)" not in screen and "Traceback" not in screen
    assert tmux.pane("#{pane_current_command}") == "bash"


def test_top_quits_on_ctrl_c_or_sigterm_and_reports_an_unreachable_database(work, tmux):
    tmux.wait_for(r"^shell\$")
    tmux.type(f"{TOP}; echo top-exited-$?")
    tmux.wait_for(PROBE_ROW.format(backlog=1))
    tmux.key("C-c")
    screen = tmux.wait_for(r"^top-exited-\d+$")
    assert re.search(r"^top-exited-0$", screen, re.M), screen
    wait_until(lambda: tmux.pane("#{alternate_on}") == "0", 10, what="the main screen back")

    # A signal from outside leaves through the same door.
    tmux.type(f"clear; {TOP}; echo top-exited-$?")
    tmux.wait_for(PROBE_ROW.format(backlog=1))
    shell = int(tmux.pane("#{pane_pid}"))
    children = subprocess.run(["ps", "-o", "pid=", "--ppid", str(shell)], capture_output=True,
                              text=True).stdout.split()
    assert len(children) == 1, children
    os.kill(int(children[0]), signal.SIGTERM)
    screen = tmux.wait_for(r"^top-exited-\d+$")
    assert re.search(r"^top-exited-0$", screen, re.M), screen
    wait_until(lambda: tmux.pane("#{alternate_on}") == "0", 10, what="the main screen back")

    tmux.type("clear; " + TOP.replace(" top", " --database-url postgresql://127.0.0.1:1/none top")
              + "; echo down-exited-$?")
    screen = tmux.wait_for(r"^down-exited-\d+$")
    assert re.search(r"^down-exited-6$", screen, re.M), screen
    assert "Error: PostgreSQL unavailable" in screen and "Traceback" not in screen


def test_top_keeps_running_while_the_database_is_away(work, conn, clean_db, tmux):
    name = psycopg.conninfo.conninfo_to_dict(clean_db)["dbname"]
    tmux.wait_for(r"^shell\$")
    tmux.type(f"{TOP}; echo top-exited-$?")
    tmux.wait_for(PROBE_ROW.format(backlog=1))
    # A database refusing new connections, and top's connection cut: what a restart or a
    # failover looks like from the client, without stopping the shared server.
    with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
        try:
            admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false')
            admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                          "WHERE datname = %s AND application_name = 'jobfence-stats'", (name,))
            screen = tmux.wait_for(r"PostgreSQL unavailable.*not currently accepting")
            assert "retrying every 300ms" in screen and "Traceback" not in screen
            # The last figures stay on screen meanwhile.
            assert re.search(PROBE_ROW.format(backlog=1), screen, re.M), screen
        finally:
            admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true')
    conn.execute("SELECT jobs.claim(%s, 'w')", (work["p3"],))
    conn.execute("SELECT jobs.complete(%s, 'w', 1)", (work["p3"],))
    screen = tmux.wait_for(PROBE_KIND.format(backlog=0))
    assert "PostgreSQL unavailable" not in screen
    tmux.key("q")
    screen = tmux.wait_for(r"^top-exited-\d+$")
    assert re.search(r"^top-exited-0$", screen, re.M), screen
