"""The API and the dashboard as shipped: each process logs in as its own least-privilege role
from scripts/roles.sql (docs/security.md), the API as jobfence_api for producer-scoped requests
and jobfence_api_admin for admin-scoped ones (docs/http.md, "Database logins"). Every /ui page
and every route of docs/http.md answers without a 500, with a producer token, an admin token
and --no-auth; a scope no login can serve is refused at start in one line."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import uuid

import psycopg
import pytest

from api_helpers import ADMIN_TOKEN, PRODUCER_TOKEN, TOKENS, start_api
from conftest import ADMIN_URL, REPO, sqitch_target, wait_until
from role_helpers import url_as
from webhook_helpers import FAST, Hook

ROLES_SQL = REPO / "scripts" / "roles.sql"
LOGINS = ("jobs_owner", "jobfence_worker", "jobfence_reaper", "jobfence_relay", "jobfence_api",
          "jobfence_api_admin", "jobfence_admin")


@contextlib.contextmanager
def _deployed(*roles_args: str):
    """A database set up as scripts/run sets it up: roles.sql by the DBA, the deploy by
    jobs_owner. Yields {login: url} ("dba" too)."""
    name = f"jobfence_shipped_{uuid.uuid4().hex[:8]}"
    done = subprocess.run(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-v", f"db={name}",
                           *roles_args, "-f", str(ROLES_SQL), ADMIN_URL],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    try:
        dba_url = ADMIN_URL.rsplit("/", 1)[0] + f"/{name}"
        urls = {role: url_as(dba_url, role) for role in LOGINS}
        urls["dba"] = dba_url
        deployed = subprocess.run(["sqitch", "--quiet", "deploy", sqitch_target(urls["jobs_owner"])],
                                  cwd=REPO, capture_output=True, text=True, timeout=300)
        assert deployed.returncode == 0, deployed.stdout + deployed.stderr
        yield urls
    finally:
        with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _jobfence(url: str, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "jobfence", *args], input=stdin,
                          env={**_env(), "JOBFENCE_DATABASE_URL": url},
                          capture_output=True, text=True, timeout=60, cwd=REPO)


@pytest.fixture(scope="module")
def shipped():
    """The kinds of the example app declared by jobfence_admin (its table: roles.sql's
    example_app switch, as docker-compose.yml does)."""
    with _deployed("-v", "example_app=1") as urls:
        declared = _jobfence(urls["jobfence_admin"], "worker", "--app", "jobfence.examples:app",
                             "--declare-only")
        assert declared.returncode == 0, declared.stderr
        yield urls


def _env():
    import os
    return {k: v for k, v in os.environ.items() if not k.startswith("JOBFENCE_")}


def _api(procs, shipped, *extra, tokens=TOKENS, token=PRODUCER_TOKEN, admin=True):
    env = {"JOBFENCE_DATABASE_URL": shipped["jobfence_api"]}
    if admin:
        env["JOBFENCE_API_ADMIN_DATABASE_URL"] = shipped["jobfence_api_admin"]
    return start_api(procs, *extra, env=env, tokens=tokens, token=token)


def _failed_job(shipped) -> int:
    with psycopg.connect(shipped["jobfence_admin"], autocommit=True) as c:
        job = c.execute("SELECT id FROM jobs.submit('noop', '{}')").fetchone()[0]
        c.execute("SELECT jobs.cancel(%s, 'for the dead letters page')", (job,))
    return job


UI_PAGES = ("/ui", "/ui/fragments/overview", "/ui/health", "/ui/dead-letters", "/ui/jobs",
            "/ui/jobs?status=failed")


def _every_read(api, job: int, token) -> dict[str, int]:
    paths = UI_PAGES + (f"/ui/jobs/{job}", f"/ui/jobs/{job}/confirm?action=replay",
                        "/queues", "/schedules", "/jobs", f"/jobs/{job}", f"/jobs/{job}/events",
                        f"/jobs/{job}/children", "/healthz", "/metrics")
    return {p: api.get(p, token=token).status for p in paths}


def test_no_auth_serves_every_page_and_route_under_the_shipped_roles(procs, shipped):
    api = _api(procs, shipped, "--no-auth", tokens=None, token=None)
    job = _failed_job(shipped)
    answers = _every_read(api, job, None)
    assert all(code == 200 for code in answers.values()), answers
    writes = {
        "submit": api.post("/jobs", {"kind": "noop", "payload": {}}).status,
        "pause": api.post("/queues/default/pause").status,
        "resume": api.post("/queues/default/resume").status,
        "schedule": api.call("PUT", "/schedules/nightly", {"kind": "noop", "cron": "0 3 * * *"}).status,
        "unschedule": api.call("DELETE", "/schedules/nightly").status,
        "replay": api.post(f"/jobs/{job}/replay").status,
        "replay_many": api.post("/dead-letters/replay", {"kind": "noop"}).status,
    }
    assert writes == {"submit": 202, "pause": 200, "resume": 200, "schedule": 201,
                      "unschedule": 204, "replay": 202, "replay_many": 200}, writes
    # Admin-scoped work ran as the admin login, recorded in the audit trail.
    with psycopg.connect(shipped["jobfence_admin"], autocommit=True) as c:
        roles = {r[0] for r in c.execute(
            "SELECT session_role::text FROM jobs.events(%s) WHERE reason = 'replayed'", (job,))}
    assert roles == {"jobfence_api_admin"}, roles


def test_tokens_run_each_scope_as_its_own_login(procs, shipped):
    api = _api(procs, shipped)
    job = _failed_job(shipped)
    for token in (PRODUCER_TOKEN, ADMIN_TOKEN):
        answers = _every_read(api, job, token)
        # A producer token looks but does not act: /metrics and the replay form are admin's.
        admin_only = ("/metrics", f"/ui/jobs/{job}/confirm?action=replay")
        expected = {p: (403 if p in admin_only and token == PRODUCER_TOKEN else 200) for p in answers}
        assert answers == expected, (token[:8], answers)
    assert api.post("/queues/default/pause", token=PRODUCER_TOKEN).status == 403
    assert api.post("/queues/default/pause", token=ADMIN_TOKEN).status == 200
    assert api.post("/queues/default/resume", token=ADMIN_TOKEN).status == 200
    submitted = api.post("/jobs", {"kind": "noop", "payload": {}}, token=PRODUCER_TOKEN)
    assert submitted.status == 202, submitted.data
    with psycopg.connect(shipped["jobfence_admin"], autocommit=True) as c:
        by = c.execute("SELECT submitted_by::text FROM jobs.get(%s)",
                       (submitted.data["id"],)).fetchone()[0]
    assert by == "jobfence_api"


def test_an_admin_scope_without_an_admin_login_is_refused_at_start(procs, shipped):
    for args, tokens in ((["--no-auth"], None), ([], TOKENS)):
        env = {"JOBFENCE_DATABASE_URL": shipped["jobfence_api"]}
        if tokens:
            env["JOBFENCE_API_TOKENS"] = tokens
        p = subprocess.run([sys.executable, "-m", "jobfence", "api", "--port", "0", *args],
                           env={**_env(), **env}, capture_output=True, text=True, timeout=60, cwd=REPO)
        assert p.returncode == 2, (p.returncode, p.stderr)
        assert "JOBFENCE_API_ADMIN_DATABASE_URL" in p.stderr and "jobfence_api" in p.stderr, p.stderr
        assert "Traceback" not in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr


def test_a_missing_grant_is_a_problem_document_naming_it(procs, shipped):
    # Producer tokens only and no admin login: the API starts; what needs jobs_admin says so.
    api = _api(procs, shipped, tokens=PRODUCER_TOKEN, admin=False)
    answer = api.get("/queues")
    assert answer.status == 500 and answer.media_type == "application/problem+json", answer.raw
    assert answer.data["name"] == "missing_grant" and answer.data["sqlstate"] == "42501"
    assert "JOBFENCE_API_ADMIN_DATABASE_URL" in answer.data["hint"], answer.data
    page = api.get("/ui")
    assert page.status == 500 and b"Missing database grant" in page.raw, page.raw[:300]
    assert b"jobs_admin" in page.raw
    assert api.post("/jobs", {"kind": "noop", "payload": {}}).status == 202


def test_your_own_transactional_kind_under_the_shipped_roles(procs):
    """docs/python.md, "Your own kind under the shipped roles": the DBA creates the app's
    table from `jobfence grants`, an administrator declares, the workers (jobs_worker, no
    --no-declare) run it. Before the grants, each step that cannot work says why in one line."""
    app = ["--app", "jobfence.examples:app"]
    with _deployed() as urls:
        early = _jobfence(urls["jobfence_worker"], "--log-format", "json", "worker", *app,
                          "--pop-timeout", "0.2")
        assert early.returncode == 1, (early.returncode, early.stderr[-2000:])
        line = next(l for l in early.stderr.splitlines() if '"app_setup_failed"' in l)
        assert "public.jobfence_example_effect" in line and "jobfence grants --app" in line, line
        assert "Traceback" not in early.stderr
        refused = _jobfence(urls["jobfence_admin"], "worker", *app, "--declare-only")
        assert refused.returncode == 1 and "jobfence grants" in refused.stderr, refused.stderr
        assert len(refused.stderr.strip().splitlines()) == 1 and "Traceback" not in refused.stderr

        sql = _jobfence(urls["dba"], "grants", *app)
        assert sql.returncode == 0 and "GRANT SELECT, INSERT ON public.jobfence_example_effect TO jobs_worker" in sql.stdout
        applied = subprocess.run(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", urls["dba"]],
                                 input=sql.stdout, capture_output=True, text=True, timeout=60)
        assert applied.returncode == 0, applied.stderr
        declared = _jobfence(urls["jobfence_admin"], "worker", *app, "--declare-only")
        assert declared.returncode == 0, declared.stderr

        worker = procs.start("worker", "worker", *app, "--pop-timeout", "0.2",
                             env={"JOBFENCE_DATABASE_URL": urls["jobfence_worker"]})
        worker.wait_for("worker_ready", timeout=30)
        relay = procs.start("relay", "relay", "--poll-interval", "0.5",
                            env={"JOBFENCE_DATABASE_URL": urls["jobfence_relay"]})
        relay.wait_for("relay_listening", timeout=30)
        assert worker.find("declare_skipped")  # it may not declare: an administrator did
        with psycopg.connect(urls["jobfence_api"], autocommit=True) as api:
            job = api.execute("SELECT id FROM jobs.submit('transfer', '{\"amount\": 5}')").fetchone()[0]
            wait_until(lambda: api.execute("SELECT status::text FROM jobs.get(%s)", (job,)).fetchone()[0] == "done",
                       30, what=f"transfer {job} done\n{worker.tail()}")
        with psycopg.connect(urls["dba"], autocommit=True) as dba:
            assert dba.execute("SELECT count(*) FROM public.jobfence_example_effect WHERE job_id = %s",
                               (job,)).fetchone()[0] == 1


def test_a_dead_letter_pages_the_webhook_under_the_shipped_roles(procs, shipped):
    """The dead-letter path as shipped: a producer login submits, the worker login fails the
    job for good, and the reaper login's forwarder claims the page and delivers it; an
    administrator login reads it back with `jobfence pages`."""
    import json

    hook = Hook()
    try:
        with psycopg.connect(shipped["jobfence_admin"], autocommit=True) as admin:
            admin.execute("SELECT jobs.define_type('shipped.dead', max_retries => 0)")
        reaper = procs.reaper("--dead-letter-webhook", hook.url, *FAST,
                              env={"JOBFENCE_DATABASE_URL": shipped["jobfence_reaper"]})
        reaper.wait_for("dead_letters_listening")
        with psycopg.connect(shipped["jobfence_api"], autocommit=True) as producer:
            job = producer.execute("SELECT id FROM jobs.submit('shipped.dead', notify => false)"
                                   ).fetchone()[0]
        with psycopg.connect(shipped["jobfence_worker"], autocommit=True) as worker:
            lease = worker.execute("SELECT lease_version FROM jobs.claim(%s, 'w-shipped')",
                                   (job,)).fetchone()[0]
            worker.execute("SELECT jobs.fail(%s, 'w-shipped', %s, 'poison', false)", (job, lease))
        wait_until(lambda: hook.delivered_job_ids() == {job}, 20,
                   what=f"the page delivered\n{reaper.tail()}")
        listed = _jobfence(shipped["jobfence_admin"], "pages", "--all", "--json")
        assert listed.returncode == 0, listed.stderr
        pages = [p for p in json.loads(listed.stdout)["pages"] if p["job_id"] == job]
        assert pages and pages[0]["delivered_at"], pages
        assert not reaper.find("permission denied"), reaper.tail()
    finally:
        hook.close()


def test_status_under_the_worker_login_shows_the_job_without_its_history(shipped):
    # A worker's role may read a job (jobs.get) but not its history (jobs.events): status
    # shows the job and says why the history is missing, instead of failing with 42501.
    submitted = _jobfence(shipped["jobfence_admin"], "submit", "noop", "--json")
    assert submitted.returncode == 0, submitted.stderr
    job_id = str(json.loads(submitted.stdout)["id"])
    shown = _jobfence(shipped["jobfence_worker"], "status", job_id)
    assert shown.returncode == 0, shown.stderr
    assert "kind" in shown.stdout and "noop" in shown.stdout and "reason" not in shown.stdout
    assert "may not read a job's history" in shown.stderr and "Traceback" not in shown.stderr
    as_json = _jobfence(shipped["jobfence_worker"], "status", job_id, "--json")
    assert as_json.returncode == 0, as_json.stderr
    assert json.loads(as_json.stdout)["events"] is None
    # The admin's login reads the history as before.
    full = _jobfence(shipped["jobfence_admin"], "status", job_id, "--json")
    assert [e["reason"] for e in json.loads(full.stdout)["events"]][:1] == ["submitted"]
