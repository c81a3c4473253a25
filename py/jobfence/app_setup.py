"""What an app needs in the database besides its kinds, and getting it there under the shipped
roles (docs/python.md, "Your own kind under the shipped roles").

A handler that writes its effect in the job's transaction (``transactional=True``) writes a
table of the team's own. The workers log in as ``jobs_worker`` members, which may not create
anything, and neither may ``jobs_admin`` (PostgreSQL 15 gives nobody CREATE on ``public``). So
the table is declared on the app (``App.table``), created by whoever owns its schema — the
DBA — from the SQL ``jobfence grants --app`` prints, and checked by each worker at start:
what is missing is one line naming the table, the login and the command that fixes it.
"""

from __future__ import annotations

from dataclasses import dataclass

import psycopg
from psycopg import sql as pgsql

from .errors import first_line


@dataclass(frozen=True)
class Table:
    name: str          # schema-qualified, e.g. "billing.transfers"
    ddl: str           # CREATE TABLE IF NOT EXISTS ...: idempotent
    privileges: tuple  # what the handlers do to it, e.g. ("SELECT", "INSERT")


class AppSetupError(Exception):
    """The app cannot run under this login; the message is the one line to print."""


PRIVILEGES = ("SELECT", "INSERT", "UPDATE", "DELETE")


def table(name: str, ddl: str, privileges: str | tuple = ("SELECT", "INSERT")) -> Table:
    privs = tuple(p.strip().upper() for p in (privileges.split(",") if isinstance(privileges, str)
                                              else privileges) if p.strip())
    unknown = [p for p in privs if p not in PRIVILEGES]
    if "." not in name or unknown or not privs:
        raise ValueError(f"table {name!r}: name it with its schema (e.g. public.{name}) and "
                         f"privileges among {', '.join(PRIVILEGES)}")
    return Table(name, ddl.strip().rstrip(";"), privs)


def grants_sql(app, app_ref: str, role: str = "jobs_worker") -> str:
    """The SQL a DBA (the owner of the tables' schemas) runs once, then again after a table
    is added: idempotent."""
    out = [f"-- {app_ref}: the tables its handlers write, for the owner of their schema",
           "-- (or a superuser) to run once:",
           f"--   jobfence grants --app {app_ref} | psql -X -v ON_ERROR_STOP=1 -d DATABASE",
           "-- then declare its kinds as an administrator (a jobs_admin login):",
           f"--   jobfence worker --app {app_ref} --declare-only",
           "BEGIN;"]
    for t in app.tables.values():
        out.append(f"{t.ddl};")
        out.append(f"GRANT {', '.join(t.privileges)} ON {t.name} TO {role};")
    out.append("COMMIT;")
    return "\n".join(out) + "\n"


def prepare_tables(app, conn: psycopg.Connection, app_ref: str | None, create: bool,
                   for_handlers: bool = True) -> None:
    """Each table of the app exists and (``for_handlers``) this login may do what the
    handlers do to it. A
    missing table is created when ``create`` and the login may (a superuser on a laptop);
    otherwise, or when a privilege is missing, AppSetupError."""
    fix = f"jobfence grants --app {app_ref or 'MODULE:APP'} | psql ... as the schema's owner"
    me = conn.execute("SELECT session_user::text").fetchone()[0]
    for t in app.tables.values():
        exists = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (t.name,)).fetchone()[0]
        if not exists and create:
            try:
                with conn.transaction():
                    conn.execute(t.ddl)
                exists = True
            except (psycopg.errors.InsufficientPrivilege, psycopg.errors.InvalidSchemaName) as exc:
                raise AppSetupError(
                    f"table {t.name} does not exist and login {me} may not create it "
                    f"({first_line(exc)}): run `{fix}`") from None
            except (psycopg.errors.UniqueViolation, psycopg.errors.DuplicateTable):
                exists = True  # another worker created it at the same moment
        if not exists:
            raise AppSetupError(f"table {t.name} does not exist: run `{fix}`")
        if not for_handlers:
            continue
        lacking = [p for p in t.privileges if not conn.execute(
            pgsql.SQL("SELECT has_table_privilege(session_user, %s, {})").format(pgsql.Literal(p)),
            (t.name,)).fetchone()[0]]
        if lacking:
            raise AppSetupError(f"login {me} lacks {', '.join(lacking)} on {t.name}, which the "
                                f"handlers need: run `{fix}`")


def run_start_hooks(app, db) -> None:
    """Each ``on_start`` hook; a failing one is AppSetupError naming it and the cause."""
    for hook in app.start_hooks:
        name = getattr(hook, "__qualname__", repr(hook))
        try:
            with db.connection() as conn:
                hook(conn)
        except psycopg.OperationalError:
            raise
        except psycopg.errors.InsufficientPrivilege as exc:
            raise AppSetupError(
                f"on_start hook {name} failed: {first_line(exc)}; a worker's login may not "
                "create or alter anything: declare the tables with app.table and have the "
                "schema's owner run `jobfence grants --app ...`") from None
        except Exception as exc:  # noqa: BLE001 - the hook is the app's code: name it, whatever it raised
            raise AppSetupError(f"on_start hook {name} failed: "
                                f"{type(exc).__name__}: {first_line(exc)}") from None
