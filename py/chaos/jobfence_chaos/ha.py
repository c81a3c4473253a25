"""``scripts/ha up|status|down``: the failover formation (jobfence_chaos.formation) on this
machine, left running between commands, its state in one directory.

    scripts/ha up        # start it; prints the two URLs every jobfence process takes
    scripts/ha status    # who is primary, what the monitor says (--json for scripts)
    scripts/ha down      # stop every server of it and remove the directory
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import click

from .formation import Formation, FormationError

DEFAULT_DIR = Path(os.environ.get("TMPDIR", "/tmp")) / "jobfence-ha"


@click.group()
@click.option("--dir", "workdir", type=click.Path(file_okay=False, path_type=Path),
              default=DEFAULT_DIR, show_default=True, help="Where the formation lives.")
@click.pass_context
def main(ctx, workdir):
    """PostgreSQL under pg_auto_failover and Redis under Sentinel, on loopback."""
    ctx.obj = workdir


@main.command()
@click.pass_obj
def up(workdir):
    """Start the formation (about 15 s) and print its URLs as shell exports."""
    if (workdir / "state.json").exists():
        raise click.ClickException(f"a formation already lives in {workdir}: scripts/ha down first")
    try:
        formation = Formation(workdir).up()
    except FormationError as exc:
        raise click.ClickException(str(exc)) from None
    for name, value in formation.urls().items():
        click.echo(f"export {name}='{value}'")


@main.command()
@click.option("--json", "as_json", is_flag=True, help="One JSON object.")
@click.pass_obj
def status(workdir, as_json):
    """Who takes writes, and what the monitor and the sentinels say."""
    if not (workdir / "state.json").exists():
        raise click.ClickException(f"no formation in {workdir}: scripts/ha up")
    found = Formation(workdir).status()
    if as_json:
        click.echo(json.dumps(found))
        return
    for name, value in found["urls"].items():
        click.echo(f"{name}={value}")
    for node, state in sorted(found.get("postgres", {}).items()):
        click.echo(f"postgres {node}: {state['reported']} (assigned {state['assigned']})")
    click.echo(f"postgres primary: {found.get('postgres_primary', found.get('postgres_error'))}")
    click.echo(f"redis master port: {found.get('redis_master_port', found.get('redis_error'))}")


@main.command()
@click.pass_obj
def down(workdir):
    """Stop every server of the formation and remove its directory."""
    if not (workdir / "state.json").exists():
        click.echo(f"no formation in {workdir}", err=True)
        return
    Formation(workdir).down()
    click.echo(f"stopped; {workdir} removed")


if __name__ == "__main__":
    sys.exit(main())
