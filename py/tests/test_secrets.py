"""Passwords in connection URLs work and are never printed: not by a command's error, not in
a process's log lines, not in `jobfence run`'s output or its children's command lines, not
in the API's answers, not on a metrics page. Real servers; the local PostgreSQL trusts
127.0.0.1, so any password works for a LOGIN role, and Redis is given one with
``requirepass``."""

from __future__ import annotations

import os
import subprocess
import sys
import urllib.error
import urllib.request

import psycopg
import pytest

from conftest import REPO, RedisServer, _free_port, wait_until
from jobfence import redact
from role_helpers import login_role, url_as

PG_SECRET = "pg-Secret-7f3a"
REDIS_SECRET = "redis-Secret-91c2"


def _run(*args: str, env: dict, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "jobfence", *args], env=env, cwd=REPO,
                          capture_output=True, text=True, timeout=timeout)


def _assert_secret_free(*texts: str) -> None:
    for text in texts:
        assert PG_SECRET not in text and REDIS_SECRET not in text, text[-3000:]
        # The percent-decoded and the encoded forms alike.
        assert "pg-Secret" not in text and "redis-Secret" not in text, text[-3000:]


# -- the helper --------------------------------------------------------------------------------
@pytest.mark.parametrize("raw, shown", [
    ("postgresql://u:hunter22@h:5432/db?sslmode=require", "postgresql://u:***@h:5432/db?sslmode=require"),
    ("rediss://:hunter22@h:6380/0", "rediss://:***@h:6380/0"),
    ("redis://default:hunter22@h/0", "redis://default:***@h/0"),
    ("host=h user=u password=hunter22 sslmode=verify-full", "host=h user=u password=*** sslmode=verify-full"),
    ("host=h password='hunter 22' dbname=d", "host=h password=*** dbname=d"),
    ('missing "=" after "postgresql//u:hunter22@h/db" in connection info string',
     'missing "=" after "postgresql//u:***@h/db" in connection info string'),
    ("postgresql://u@h/db", "postgresql://u@h/db"),
    ("https://example.com:8080/a@b", "https://example.com:8080/a@b"),
])
def test_redact_masks_passwords_and_keeps_the_rest(raw, shown):
    assert redact.text(raw) == shown


def test_redact_masks_registered_passwords_wherever_they_appear():
    redact.register("postgresql://u:p%25zz-Registered@h/db")
    # libpq quotes the bad token alone, where no pattern can see a password.
    assert redact.text('invalid percent-encoded token: "p%25zz-Registered"') == \
        'invalid percent-encoded token: "***"'
    assert redact.text("p%zz-Registered") == "***"


# -- the commands and processes ----------------------------------------------------------------
@pytest.fixture
def secret_urls(declared, tmp_path):
    """A PostgreSQL login role with a password (granted jobs_admin) and a Redis that
    requires one: (database URL, Redis URL, environment)."""
    server = RedisServer(tmp_path)
    server.start()
    import redis as redis_lib

    plain = redis_lib.Redis(port=server.port)
    plain.config_set("requirepass", REDIS_SECRET)
    plain.close()
    with login_role(declared, "jobs_admin", "jobs_worker", password=PG_SECRET) as role:
        with psycopg.connect(declared, autocommit=True) as admin:
            # The example app's table, as `jobfence grants` grants it (docs/python.md).
            admin.execute(f'GRANT SELECT, INSERT ON public.jobfence_example_effect TO "{role}"')
        db = url_as(declared, role, PG_SECRET) + "?sslmode=prefer&application_name=secrets"
        rd = f"redis://:{REDIS_SECRET}@127.0.0.1:{server.port}/0"
        env = dict(os.environ, JOBFENCE_DATABASE_URL=db, JOBFENCE_REDIS_URL=rd)
        try:
            yield db, rd, env
        finally:
            server.stop()


def test_urls_with_passwords_and_tls_options_work(secret_urls):
    db, rd, env = secret_urls
    done = _run("submit", "noop", "--json", env=env)
    assert done.returncode == 0, done.stderr
    shown = _run("status", "1", "--json", env=env)
    assert shown.returncode == 0, shown.stderr
    _assert_secret_free(done.stdout, done.stderr, shown.stdout, shown.stderr)


@pytest.mark.parametrize("database_url, code", [
    # A URL that lost its colon: libpq quotes all of it in its error; malformed, so a usage
    # error at once (exit 2, docs/cli.md), never retried as "unavailable".
    (f"postgresql//someone:{PG_SECRET}@127.0.0.1:5432/db", 2),
    # A password with a bad percent escape: libpq quotes the token.
    (f"postgresql://someone:{PG_SECRET}%zz@127.0.0.1:5432/db", 2),
    # Nobody listens there.
    (f"postgresql://someone:{PG_SECRET}@127.0.0.1:1/db?connect_timeout=2", 6),
    # TLS that the server cannot give.
    (f"postgresql://someone:{PG_SECRET}@127.0.0.1:5432/db?sslmode=require&connect_timeout=2", 6),
    (f"postgresql://someone:{PG_SECRET}@127.0.0.1:5432/db?sslmode=bogus", 6),
])
def test_status_with_a_bad_database_url_never_prints_its_password(database_url, code):
    for command in (["status", "1"], ["--database-url", database_url, "status", "1"])[
            :1 if code == 6 and "sslmode" in database_url else 2]:
        env = dict(os.environ, JOBFENCE_DATABASE_URL=database_url)
        done = _run(*command, env=env)
        assert done.returncode == code, done.stderr
        assert "Traceback" not in done.stderr
        _assert_secret_free(done.stdout, done.stderr)


# "{port}" is a port nobody listens on, chosen when the test runs: parameters must be the
# same in every collecting process (tests run in parallel, scripts/test).
@pytest.mark.parametrize("redis_url", [
    f"redis://:{REDIS_SECRET}@127.0.0.1:{{port}}/0",               # nobody listens
    f"rediss://:{REDIS_SECRET}@127.0.0.1:{{port}}/0",              # TLS, nobody listens
    f"redis://:{REDIS_SECRET}@127.0.0.1:notaport/0",              # malformed
])
def test_submit_with_a_bad_redis_url_never_prints_its_password(secret_urls, redis_url):
    db, _, env = secret_urls
    redis_url = redis_url.replace("{port}", str(_free_port()))
    done = _run("submit", "noop", env=dict(env, JOBFENCE_REDIS_URL=redis_url))
    # The job is committed either way; the push is what fails (docs/cli.md).
    assert done.returncode in (0, 2, 6), done.stderr
    assert "Traceback" not in done.stderr
    _assert_secret_free(done.stdout, done.stderr)


def test_a_worker_that_cannot_reach_redis_never_logs_its_passwords(secret_urls, tmp_path):
    db, _, env = secret_urls
    log = tmp_path / "worker.log"
    bad = f"redis://:{REDIS_SECRET}@127.0.0.1:{_free_port()}/0"
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "jobfence", "--log-format", "json",
                                 "worker", "--app", "jobfence.examples:app", "--pop-timeout",
                                 "0.2", "--metrics-port", "0"],
                                env=dict(env, JOBFENCE_REDIS_URL=bad), stdout=out,
                                stderr=subprocess.STDOUT, cwd=REPO)
    try:
        wait_until(lambda: "redis" in log.read_text().lower() and "unavailable" in
                   log.read_text().lower(), 30, what="the worker to report Redis unavailable")
        # The process's command line carries no URL either: the environment does.
        cmdline = open(f"/proc/{proc.pid}/cmdline", "rb").read().decode()
        _assert_secret_free(cmdline)
    finally:
        proc.terminate()
        proc.wait(30)
    _assert_secret_free(log.read_text())


def test_jobfence_run_prints_no_password_and_hands_each_child_its_own_url(secret_urls, declared,
                                                                         tmp_path):
    db, rd, env = secret_urls
    with login_role(declared, "jobs_worker", password=PG_SECRET) as worker_role:
        with psycopg.connect(declared, autocommit=True) as admin:
            admin.execute(f'GRANT SELECT, INSERT ON public.jobfence_example_effect TO "{worker_role}"')
        worker_url = url_as(declared, worker_role, PG_SECRET)
        _run_tree(dict(env, JOBFENCE_WORKER_DATABASE_URL=worker_url), declared, db, worker_url,
                  worker_role, tmp_path)


def _run_tree(env, declared, db, worker_url, worker_role, tmp_path):
    log = tmp_path / "run.log"
    port = _free_port()
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "jobfence", "run", "--workers", "1",
                                 "--api-port", str(port), "--metrics-port", "0"],
                                env=env, stdout=out, stderr=subprocess.STDOUT, cwd=REPO)
    try:
        wait_until(lambda: "worker_ready" in log.read_text() and "api_listening" in
                   log.read_text(), 60, what=f"jobfence run ready\n{log.read_text()[-2000:]}")
        children = subprocess.run(["pgrep", "-P", str(proc.pid)], capture_output=True,
                                  text=True).stdout.split()
        assert len(children) >= 4
        for pid in children:
            _assert_secret_free(open(f"/proc/{pid}/cmdline", "rb").read().decode())
            environ = dict(v.split("=", 1) for v in open(f"/proc/{pid}/environ", "rb").read()
                           .decode().split("\0") if "=" in v)
            # Each child holds one database URL, its own.
            assert not [k for k in environ if k.endswith("_DATABASE_URL")
                        and k != "JOBFENCE_DATABASE_URL"], sorted(environ)
            assert environ["JOBFENCE_DATABASE_URL"] in (db, worker_url)
        with psycopg.connect(declared, autocommit=True) as admin:
            logins = dict(admin.execute(
                "SELECT DISTINCT application_name, usename FROM pg_stat_activity "
                "WHERE datname = current_database() AND application_name IN "
                "('jobfence-worker', 'jobfence-relay', 'jobfence-reaper')").fetchall())
        assert logins["jobfence-worker"] == worker_role
        assert logins["jobfence-relay"] != worker_role and logins["jobfence-reaper"] != worker_role
        # The API's own errors: a job that does not exist, and the health answer.
        for path in ("/jobs/999999", "/healthz"):
            try:
                body = urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10).read()
            except urllib.error.HTTPError as exc:
                body = exc.read()
            _assert_secret_free(body.decode())
    finally:
        proc.terminate()
        proc.wait(60)
    _assert_secret_free(log.read_text())


def test_the_metrics_page_of_a_process_shows_no_password(secret_urls, tmp_path):
    db, rd, env = secret_urls
    port = _free_port()
    log = tmp_path / "relay.log"
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "jobfence", "relay", "--metrics-port",
                                 str(port)], env=env, stdout=out, stderr=subprocess.STDOUT,
                                cwd=REPO)
    try:
        def page():
            try:
                return urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics",
                                              timeout=5).read().decode()
            except OSError:
                return None
        text = wait_until(lambda: (p := page()) and "jobfence_relay_listening 1" in p and p, 30,
                          what="the relay's metrics")
        _assert_secret_free(text)
    finally:
        proc.terminate()
        proc.wait(30)
    _assert_secret_free(log.read_text())
