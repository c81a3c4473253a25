"""Login roles for the tests that check what a role may do: created once per test database,
cluster-wide (as every role is), dropped when the test is done."""

from __future__ import annotations

import contextlib
import uuid
from typing import Iterator

import psycopg
from psycopg import sql as pgsql
from psycopg.conninfo import conninfo_to_dict


def url_as(database_url: str, role: str, password: str | None = None) -> str:
    """The same database, logged in as ``role`` (a libpq URL, as the processes take)."""
    info = conninfo_to_dict(database_url)
    host, port, dbname = info.get("host", "127.0.0.1"), info.get("port", "5432"), info["dbname"]
    secret = f":{password}" if password else ""
    return f"postgresql://{role}{secret}@{host}:{port}/{dbname}"


@contextlib.contextmanager
def login_role(database_url: str, *groups: str, password: str | None = None,
               prefix: str = "jobfence_t") -> Iterator[str]:
    """A fresh LOGIN role, member of ``groups`` (none: a role with no grant at all);
    yields its name."""
    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(database_url, autocommit=True) as admin:
        admin.execute(pgsql.SQL("CREATE ROLE {} LOGIN {}").format(
            pgsql.Identifier(name),
            pgsql.SQL("PASSWORD {}").format(pgsql.Literal(password)) if password else pgsql.SQL("")))
        for group in groups:
            admin.execute(pgsql.SQL("GRANT {} TO {}").format(pgsql.Identifier(group),
                                                            pgsql.Identifier(name)))
    try:
        yield name
    finally:
        with psycopg.connect(database_url, autocommit=True) as admin:
            # Its sessions first: a role with a live connection cannot be dropped.
            admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                          "WHERE usename = %s", (name,))
            admin.execute(pgsql.SQL("DROP OWNED BY {}").format(pgsql.Identifier(name)))
            admin.execute(pgsql.SQL("DROP ROLE IF EXISTS {}").format(pgsql.Identifier(name)))
