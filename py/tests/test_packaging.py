"""The wheel a user installs carries the product and nothing else (no top-level `tests`
package landing in site-packages), the dashboard's templates and the SQL schema ride along,
and the schema deploys from the installed package, with sqitch or as one psql script."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile

import psycopg
import pytest

from conftest import ADMIN_URL, REPO, wait_until
from schema_helpers import catalog


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    # A copy without build/: setuptools reuses build/lib, which may hold what an older
    # configuration put there.
    tmp = tmp_path_factory.mktemp("wheel")
    source = tmp / "source"
    shutil.copytree(REPO, source, ignore=shutil.ignore_patterns(
        ".git", ".venv", "build", "var", "*.egg-info", "__pycache__", ".hypothesis", "results",
        "node_modules"))
    out = tmp / "wheel"
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(source)],
        capture_output=True, text=True,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    (found,) = out.glob("jobfence-*.whl")
    return found


def _plan_steps():
    from jobfence.schema_files import plan_steps

    return plan_steps(REPO)


def test_the_wheel_ships_the_jobfence_package_only(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    tops = {name.split("/", 1)[0] for name in names}
    assert tops == {"jobfence", next(t for t in tops if t.endswith(".dist-info"))}, sorted(tops)
    assert any(n.startswith("jobfence/ui/templates/") and n.endswith(".html") for n in names)
    assert "jobfence/py.typed" in names
    # The chaos harness is a package of its own (py/chaos), not part of the product.
    assert not [n for n in names if "chaos" in n], [n for n in names if "chaos" in n][:5]
    # The metadata a package index shows: classifiers, project URLs, the lean core and
    # its extras, and the one version (jobfence.__version__).
    from jobfence import __version__

    meta = zipfile.ZipFile(wheel).read(f"jobfence-{__version__}.dist-info/METADATA").decode()
    assert f"Version: {__version__}\n" in meta
    assert "Classifier: Typing :: Typed" in meta
    assert {"Source", "Documentation", "Changelog", "Issues"} <= {
        line.split(": ", 1)[1].split(",")[0] for line in meta.splitlines()
        if line.startswith("Project-URL: ")}
    required = [line.split(": ", 1)[1] for line in meta.splitlines()
                if line.startswith("Requires-Dist: ") and "extra ==" not in line]
    assert not [r for r in required if r.lower().startswith(("fastapi", "uvicorn", "textual"))]
    assert {"api", "top", "binary", "all"} <= {line.split(": ", 1)[1] for line in
                                              meta.splitlines() if line.startswith("Provides-Extra: ")}
    # The schema: the plan, its configuration and every change's three scripts.
    assert {"jobfence/schema/sqitch.plan", "jobfence/schema/sqitch.conf"} <= set(names)
    for step in _plan_steps():
        for folder in ("deploy", "revert", "verify"):
            assert f"jobfence/schema/db/{folder}/{step.script}.sql" in names, (folder, step)


def test_the_installed_wheel_deploys_its_own_schema_outside_the_checkout(
        wheel, tmp_path, scratch_databases):
    site = tmp_path / "site"
    installed = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps",
                                "--target", str(site), str(wheel)], capture_output=True, text=True)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    url = scratch_databases()
    env = dict(os.environ, PYTHONPATH=str(site), JOBFENCE_DATABASE_URL=url)

    def jobfence(*args):
        return subprocess.run([sys.executable, "-m", "jobfence", *args], cwd=elsewhere, env=env,
                              capture_output=True, text=True, timeout=300)

    where = subprocess.run([sys.executable, "-c", "import jobfence; print(jobfence.__file__)"],
                           cwd=elsewhere, env=env, capture_output=True, text=True)
    assert where.stdout.startswith(str(site)), where.stdout + where.stderr
    deployed = jobfence("db", "deploy")
    assert deployed.returncode == 0, deployed.stdout + deployed.stderr
    assert jobfence("db", "verify").returncode == 0
    with psycopg.connect(url, autocommit=True) as conn:
        assert conn.execute("SELECT count(*) FROM sqitch.changes").fetchone()[0] == len(_plan_steps())
        conn.execute("SELECT jobs.define_type('pkg.k')")
    printed = jobfence("db", "sql")
    assert printed.returncode == 0
    checkout = subprocess.run([sys.executable, "-m", "jobfence", "db", "sql"], cwd=REPO,
                              capture_output=True, text=True)
    assert printed.stdout == checkout.stdout  # the wheel's schema is the checkout's


@pytest.mark.skipif(shutil.which("pg_prove") is None or shutil.which("psql") is None,
                    reason="pg_prove or psql not installed (scripts/setup)")
def test_db_sql_through_psql_is_the_schema_sqitch_deploys_and_passes_pgtap(scratch_databases):
    by_sqitch, by_psql = scratch_databases(), scratch_databases()
    env = dict(os.environ)
    deployed = subprocess.run([sys.executable, "-m", "jobfence", "--database-url", by_sqitch,
                               "db", "deploy"], cwd=REPO, capture_output=True, text=True, env=env)
    assert deployed.returncode == 0, deployed.stdout + deployed.stderr
    script = subprocess.run([sys.executable, "-m", "jobfence", "db", "sql"], cwd=REPO,
                            capture_output=True, text=True, check=True).stdout
    applied = subprocess.run(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", by_psql], input=script,
                             capture_output=True, text=True)
    assert applied.returncode == 0, applied.stderr[-3000:]
    sqitch_catalog, psql_catalog = catalog(by_sqitch), catalog(by_psql)
    assert len(psql_catalog) > 500
    assert psql_catalog == sqitch_catalog, sorted(set(psql_catalog) ^ set(sqitch_catalog))[:20]
    # The pgTAP suite passes on the psql-deployed schema too (one file at a time, as
    # scripts/test runs it: some files create and drop event partitions).
    with psycopg.connect(by_psql, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS pgtap")
    dbname = by_psql.rsplit("/", 1)[1]
    server = psycopg.conninfo.conninfo_to_dict(ADMIN_URL)
    proved = subprocess.run(["pg_prove", "-h", server.get("host", "127.0.0.1"), "-p",
                             str(server.get("port", 5432)), "-U", server.get("user", "root"),
                             "-d", dbname, *sorted(str(p) for p in (REPO / "db" / "tests").glob("*.sql"))],
                            capture_output=True, text=True, timeout=600)
    assert proved.returncode == 0, proved.stdout[-3000:] + proved.stderr[-2000:]
    # And --revert takes it all away again (the roles are cluster-wide and stay).
    reverted = subprocess.run(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", by_psql],
                              input=subprocess.run([sys.executable, "-m", "jobfence", "db", "sql",
                                                    "--revert"], cwd=REPO, capture_output=True,
                                                   text=True, check=True).stdout,
                              capture_output=True, text=True)
    assert reverted.returncode == 0, reverted.stderr[-3000:]
    with psycopg.connect(by_psql, autocommit=True) as conn:
        assert conn.execute("SELECT to_regnamespace('jobs')").fetchone()[0] is None


# The extras' modules, made unimportable in a child interpreter: what a plain
# `pip install jobfence` (the core only) leaves a user with.
WITHOUT_EXTRAS = """
import sys
for name in ("fastapi", "starlette", "uvicorn", "jinja2", "multipart", "itsdangerous", "textual"):
    sys.modules[name] = None
"""


def _without_extras(code: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", WITHOUT_EXTRAS + code, *args], cwd=REPO,
                          capture_output=True, text=True, timeout=60)


def test_the_core_runs_without_the_extras_and_a_command_that_needs_one_names_it():
    core = _without_extras("import jobfence, jobfence.cli, jobfence.worker, jobfence.reaper, "
                           "jobfence.relay, jobfence.aio, jobfence.observe.exporter, "
                           "jobfence.deadletters; print('ok')")
    assert core.returncode == 0 and core.stdout.strip() == "ok", core.stderr
    run_cli = "from jobfence.cli import main; sys.argv = ['jobfence'] + sys.argv[1:]; main()"
    for args, extra in ((["api"], "api"), (["top"], "top"), (["run"], "api")):
        done = _without_extras(run_cli, *args)
        assert done.returncode == 2, (args, done.returncode, done.stderr)
        assert f"pip install 'jobfence[{extra}]'" in done.stderr and "Traceback" not in done.stderr
    assert _without_extras(run_cli, "worker", "--help").returncode == 0


USER_APP = '''
from jobfence import App

app = App("mymodule")


@app.task("greet")
def greet(job_id, payload, ctx):
    return {"hello": payload["name"]}
'''


def test_a_fresh_venv_with_the_wheel_deploys_and_runs_a_users_worker(
        wheel, tmp_path, scratch_databases, redis_url):
    """What the README's pip path promises: a virtualenv of its own (no checkout, no site
    packages of this one), the wheel and the dependencies it declares, then `jobfence db
    deploy` and `jobfence worker --app mymodule:app` from the user's project directory."""
    venv = tmp_path / "venv"
    made = subprocess.run([sys.executable, "-m", "venv", str(venv)], capture_output=True,
                          text=True, timeout=120)
    assert made.returncode == 0, made.stdout + made.stderr
    python, jobfence_bin = venv / "bin" / "python", venv / "bin" / "jobfence"
    installed = subprocess.run([str(python), "-m", "pip", "install", "-q", str(wheel)],
                               capture_output=True, text=True, timeout=600)
    assert installed.returncode == 0, installed.stdout[-3000:] + installed.stderr[-3000:]
    # The core only: none of the extras came along.
    listed = subprocess.run([str(python), "-m", "pip", "list", "--format=freeze"],
                            capture_output=True, text=True, timeout=60).stdout.lower()
    assert "psycopg==" in listed and "fastapi" not in listed and "textual" not in listed, listed
    # The core brings redis-py's C reply parser, and redis-py picks it up: the workers' pops
    # decode their ids in C (docs/performance.md, "Redis replies in C").
    parser = subprocess.run([str(python), "-c", "import redis.connection as c; "
                             "print(c.DefaultParser.__name__)"], capture_output=True, text=True, timeout=60)
    assert parser.stdout.strip() == "_HiredisParser", parser.stdout + parser.stderr
    project = tmp_path / "project"
    project.mkdir()
    (project / "mymodule.py").write_text(USER_APP)
    url = scratch_databases()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    env.update(PATH=f"{venv / 'bin'}:{env.get('PATH', '')}", JOBFENCE_DATABASE_URL=url,
               JOBFENCE_REDIS_URL=redis_url)

    def jobfence(*args, timeout=300):
        return subprocess.run([str(jobfence_bin), *args], cwd=project, env=env,
                              capture_output=True, text=True, timeout=timeout)

    deployed = jobfence("db", "deploy")
    assert deployed.returncode == 0, deployed.stdout + deployed.stderr
    worker = subprocess.Popen([str(jobfence_bin), "worker", "--app", "mymodule:app",
                               "--concurrency", "2"], cwd=project, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        def declared():
            assert worker.poll() is None, worker.stdout.read()[-3000:]
            with psycopg.connect(url) as conn:
                return conn.execute("SELECT 1 FROM jobs.types() WHERE kind = 'greet'").fetchone()

        wait_until(declared, timeout=60, what="the worker to declare its kind")
        submitted = jobfence("submit", "greet", "--payload", '{"name": "venv"}', "--count", "20",
                             "--wait", "--timeout", "60", "--json", timeout=120)
        assert submitted.returncode == 0, submitted.stdout + submitted.stderr
        with psycopg.connect(url) as conn:
            rows = conn.execute("SELECT status, result FROM jobs.job WHERE kind = 'greet'").fetchall()
        assert len(rows) == 20 and {r[0] for r in rows} == {"done"}, rows
        assert rows[0][1] == {"hello": "venv"}
    finally:
        worker.terminate()
        try:
            out, _ = worker.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            worker.kill()
            out, _ = worker.communicate()
    assert worker.returncode == 0, out[-3000:]
    where = subprocess.run([str(python), "-c", "import jobfence; print(jobfence.__file__)"],
                           cwd=project, env=env, capture_output=True, text=True)
    assert where.stdout.startswith(str(venv)), where.stdout + where.stderr
