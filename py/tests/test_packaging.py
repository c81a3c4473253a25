"""The wheel a user installs carries the product and nothing else (no top-level `tests`
package landing in site-packages), the dashboard's templates and the SQL schema ride along,
and the schema deploys from the installed package, with sqitch or as one psql script."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid
import zipfile

import psycopg
import pytest

from conftest import ADMIN_URL, REPO, _server_url


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


@pytest.fixture
def scratch_databases():
    """Fresh, empty databases on the test server, dropped afterwards."""
    made = []

    def make() -> str:
        name = f"jobfence_pkg_{int(time.time())}_{uuid.uuid4().hex[:8]}"
        with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
            admin.execute(f'CREATE DATABASE "{name}"')
        made.append(name)
        return f"{_server_url(ADMIN_URL)}/{name}"

    yield make
    with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
        for name in made:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _plan_changes() -> list[str]:
    from jobfence.schema_files import plan_changes

    return plan_changes(REPO)


def test_the_wheel_ships_the_jobfence_package_only(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    tops = {name.split("/", 1)[0] for name in names}
    assert tops == {"jobfence", next(t for t in tops if t.endswith(".dist-info"))}, sorted(tops)
    assert any(n.startswith("jobfence/ui/templates/") and n.endswith(".html") for n in names)
    # The schema: the plan, its configuration and every change's three scripts.
    assert {"jobfence/schema/sqitch.plan", "jobfence/schema/sqitch.conf"} <= set(names)
    for change in _plan_changes():
        for folder in ("deploy", "revert", "verify"):
            assert f"jobfence/schema/db/{folder}/{change}.sql" in names, (folder, change)


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
        assert conn.execute("SELECT count(*) FROM sqitch.changes").fetchone()[0] == len(_plan_changes())
        conn.execute("SELECT jobs.define_type('pkg.k')")
    printed = jobfence("db", "sql")
    assert printed.returncode == 0
    checkout = subprocess.run([sys.executable, "-m", "jobfence", "db", "sql"], cwd=REPO,
                              capture_output=True, text=True)
    assert printed.stdout == checkout.stdout  # the wheel's schema is the checkout's


# What a deployed schema is, as the catalog says: objects, signatures, bodies, settings,
# grants, columns, constraints, indexes and types of the jobs schema.
CATALOG = """
SELECT 'function', p.oid::regprocedure::text,
       concat_ws(' | ', pg_get_function_result(p.oid), p.prosecdef, p.provolatile, p.proconfig::text,
                 md5(p.prosrc), p.proacl::text, obj_description(p.oid, 'pg_proc') IS NOT NULL)
  FROM pg_proc AS p WHERE p.pronamespace = 'jobs'::regnamespace
UNION ALL
SELECT 'relation', c.relname, concat_ws(' | ', c.relkind, c.relacl::text)
  FROM pg_class AS c WHERE c.relnamespace = 'jobs'::regnamespace
UNION ALL
SELECT 'column', c.relname || '.' || a.attname,
       concat_ws(' | ', format_type(a.atttypid, a.atttypmod), a.attnotnull, pg_get_expr(d.adbin, d.adrelid))
  FROM pg_attribute AS a JOIN pg_class AS c ON c.oid = a.attrelid
  LEFT JOIN pg_attrdef AS d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
 WHERE c.relnamespace = 'jobs'::regnamespace AND a.attnum > 0 AND NOT a.attisdropped
UNION ALL
SELECT 'constraint', conrelid::regclass::text || '.' || conname, pg_get_constraintdef(oid)
  FROM pg_constraint WHERE connamespace = 'jobs'::regnamespace
UNION ALL
SELECT 'index', indexrelid::regclass::text, pg_get_indexdef(indexrelid)
  FROM pg_index WHERE indrelid IN (SELECT oid FROM pg_class WHERE relnamespace = 'jobs'::regnamespace)
UNION ALL
SELECT 'type', t.typname, concat_ws(' | ', t.typtype, t.typacl::text)
  FROM pg_type AS t WHERE t.typnamespace = 'jobs'::regnamespace
UNION ALL
SELECT 'schema', n.nspname, concat_ws(' | ', n.nspacl::text, pg_get_userbyid(n.nspowner) IS NOT NULL)
  FROM pg_namespace AS n WHERE n.nspname = 'jobs'
ORDER BY 1, 2
"""


def _catalog(url: str) -> list[tuple]:
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute(CATALOG).fetchall()


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
    sqitch_catalog, psql_catalog = _catalog(by_sqitch), _catalog(by_psql)
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
