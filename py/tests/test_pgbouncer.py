"""The drivers behind PgBouncer in transaction mode (docs/scaling.md, "Through PgBouncer"):
workers, producers and the reaper connect through a real PgBouncer whose pool is smaller than
its clients, the relay LISTENs on a direct URL, and the core cases — submit, batches, claim,
complete, retry, reap, delayed, fan-in, ordering keys, SQL producers through the relay — end
with every job done exactly as on direct connections. The setting matters: without it the
same pool cannot even connect (a statement timeout is a startup option PgBouncer refuses)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import psycopg
import pytest

import core_cases
from pooler_helpers import PGBOUNCER, PgBouncer

pytestmark = pytest.mark.skipif(not Path(PGBOUNCER).exists(),
                                reason="pgbouncer is not installed (scripts/setup --test installs it)")


@pytest.fixture
def bouncer(database_url):
    workdir = Path(tempfile.mkdtemp(prefix="jobfence-pgbouncer-"))
    b = PgBouncer(workdir, database_url).start()
    try:
        yield b
    finally:
        b.stop()
        shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture
def pooled(bouncer, procs, declared, monkeypatch):
    """procs and this process talk to PostgreSQL through the bouncer; LISTEN goes direct."""
    url = bouncer.url(declared)
    monkeypatch.setenv("JOBFENCE_DATABASE_POOLER", "transaction")
    procs.env.update(JOBFENCE_DATABASE_URL=url, JOBFENCE_DATABASE_POOLER="transaction",
                     JOBFENCE_LISTEN_DATABASE_URL=declared)
    return url


def test_core_cases_through_pgbouncer_in_transaction_mode(pooled, procs, redis_url, declared):
    from jobfence import Client

    with Client(pooled, redis_url) as client:
        core_cases.run(procs, client, sql_url=pooled, audit_url=declared,
                       what="every job done through pgbouncer")
    for p in procs.started:
        assert not p.find("db_unavailable"), p.tail()
        assert "prepared statement" not in p.tail(200)


def test_statement_timeout_holds_behind_the_bouncer(bouncer, declared, monkeypatch):
    from jobfence.db import Database

    url = bouncer.url(declared)
    # Without the setting the pool sends its timeout as a startup option, which PgBouncer
    # refuses: the reason the setting exists.
    monkeypatch.delenv("JOBFENCE_DATABASE_POOLER", raising=False)
    from jobfence.db import connect_kwargs

    with pytest.raises(psycopg.OperationalError, match="unsupported startup parameter: options"):
        psycopg.connect(url, **connect_kwargs("probe", statement_timeout=0.5)).close()
    monkeypatch.setenv("JOBFENCE_DATABASE_POOLER", "transaction")
    db = Database(url, max_size=2, timeout=5.0, statement_timeout=0.5)
    try:
        assert db._all("SELECT jobs.max_snoozes() AS n")[0]["n"] == 100
        with pytest.raises(psycopg.errors.QueryCanceled):
            db._all("SELECT pg_sleep(3)")
        # Many times over two clients and a three-session pool: no prepared statement is
        # kept in a session another transaction would miss.
        declared_kinds = db.types()
        assert declared_kinds
        for _ in range(30):
            assert db.types() == declared_kinds
    finally:
        db.close()


def test_relay_behind_a_pooler_needs_a_direct_listen_url(bouncer, declared, redis_url):
    env = {"JOBFENCE_DATABASE_POOLER": "transaction"}
    out = subprocess.run([sys.executable, "-m", "jobfence", "--database-url", bouncer.url(declared),
                          "--redis-url", redis_url, "relay"], capture_output=True, text=True,
                         timeout=60, env={**__import__("os").environ, **env})
    assert out.returncode == 2, out.stderr
    assert "JOBFENCE_LISTEN_DATABASE_URL" in out.stderr and "Traceback" not in out.stderr
