"""``jobfence grants --app MODULE:APP``: the SQL that lets an app's own kinds run under the
shipped roles (docs/python.md, "Your own kind under the shipped roles")."""

from __future__ import annotations

import re

import click

from .common import EXIT_USAGE, Fail, app_from

ROLE_NAME = re.compile(r"[a-z_][a-z0-9_$]{0,62}")


@click.command()
@click.option("--app", "app_ref", required=True, metavar="MODULE:APP",
              help="The App whose tables to print (as for jobfence worker).")
@click.option("--app-dir", default=".", show_default=True,
              help="Directory put first on the import path to find MODULE.")
@click.option("--role", default="jobs_worker", show_default=True,
              help="The role the handlers' privileges go to (the workers' group role).")
def grants(app_ref, app_dir, role):
    """Print the SQL a DBA runs once so the app's workers may write its tables: each table's
    CREATE TABLE IF NOT EXISTS and the GRANT of what its handlers do to it. Pipe it to psql
    as the owner of the tables' schema; then declare the kinds as an administrator."""
    from ..app_setup import grants_sql

    if not ROLE_NAME.fullmatch(role):
        raise Fail(f"--role {role!r} is not a plain role name (lower case, digits, _)", EXIT_USAGE)
    app = app_from(app_ref, app_dir)
    if not app.tables:
        raise Fail(f"--app {app_ref} declares no table: add them with app.table(name, ddl, "
                   "privileges=...) (docs/python.md), or run its workers as they are",
                   EXIT_USAGE)
    click.echo(grants_sql(app, app_ref, role), nl=False)
