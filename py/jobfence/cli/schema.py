"""The SQL schema: deploy, verify, revert (sqitch underneath)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote, urlsplit, urlunsplit

import click

from .. import redact
from ..schema_files import plan_steps, schema_root
from .common import EXIT_ERROR, EXIT_SQITCH, Fail, cfg, json_option, json_out




@click.group()
def db():
    """Deploy, verify or revert the SQL schema (wraps sqitch)."""


def _without_password(url: str) -> tuple[str, dict]:
    """The URL without its password, and an environment that carries it as PGPASSWORD
    instead: sqitch's command line is visible to every user of the machine (ps)."""
    parts = urlsplit(url)
    env = dict(os.environ)
    if "://" not in url or parts.password is None:
        return url, env
    env["PGPASSWORD"] = unquote(parts.password)
    user = parts.username or ""
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = (f"{user}@" if user else "") + host + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc)), env


def _sqitch(ctx: click.Context, action: list[str], as_json: bool) -> None:
    exe = shutil.which("sqitch")
    if exe is None:
        raise Fail("sqitch is not installed or not on PATH: install it (Debian: apt-get install "
                   "sqitch libdbd-pg-perl, or run scripts/setup) and retry", EXIT_SQITCH)
    root = schema_root()
    if root is None:
        raise Fail("this jobfence installation carries no schema (no sqitch.plan in the "
                   "package or its checkout): reinstall it from a wheel or the repository",
                   EXIT_SQITCH)
    url, env = _without_password(cfg(ctx)["database_url"])
    target = "db:" + (url if "://" in url else f"pg://{url}")
    if target.startswith("db:postgresql://"):
        target = "db:pg://" + target[len("db:postgresql://"):]
    proc = subprocess.run([exe] + action + [target], cwd=root, capture_output=True, text=True,
                          env=env)
    out, err = redact.text(proc.stdout), redact.text(proc.stderr)
    if as_json:
        json_out({"action": action[0], "ok": proc.returncode == 0, "exit": proc.returncode,
                   "output": (out + err).strip()})
    else:
        sys.stdout.write(out)
        sys.stderr.write(err)
    if proc.returncode != 0:
        hint = ""
        if "Cannot find change" in out + err:
            # Deployed from a plan this checkout no longer has (an untagged development
            # plan changes in place): nothing here can move it; docs/upgrading.md.
            hint = ("; this database was deployed from another plan: deploy to a new database, "
                    "or revert it with the checkout that deployed it (docs/upgrading.md)")
        raise Fail(f"sqitch {action[0]} failed with exit {proc.returncode}{hint}", EXIT_SQITCH)


@db.command("deploy")
@json_option
@click.pass_context
def db_deploy(ctx, as_json):
    """sqitch deploy --verify to --database-url."""
    _sqitch(ctx, ["deploy", "--verify"], as_json)


@db.command("verify")
@json_option
@click.pass_context
def db_verify(ctx, as_json):
    """sqitch verify against --database-url."""
    _sqitch(ctx, ["verify"], as_json)


@db.command("revert")
@click.option("--yes", is_flag=True, help="Do not ask (required without a terminal).")
@json_option
@click.pass_context
def db_revert(ctx, yes, as_json):
    """sqitch revert (drops the jobs schema and every job in it)."""
    if not yes and not click.confirm("Revert drops every job. Continue?", default=False):
        raise Fail("aborted", EXIT_ERROR)
    _sqitch(ctx, ["revert", "-y"], as_json)




def schema_script(root: Path, revert: bool = False) -> str:
    """Every deploy script in plan order (revert: every revert script, last change first) as
    one psql script in one transaction: for DBAs who deploy with another tool. Each file's
    own BEGIN/COMMIT lines go; the sqitch registry is not written."""
    steps = plan_steps(root)
    folder = root / "db" / ("revert" if revert else "deploy")
    parts = ["-- jobfence schema: " + ("revert" if revert else "deploy")
             + f", {len(steps)} changes of sqitch.plan in "
             + ("reverse order" if revert else "order")
             + ". Run with: psql -X -v ON_ERROR_STOP=1 -f FILE",
             "\\set ON_ERROR_STOP on", "BEGIN;"]
    for step in (reversed(steps) if revert else steps):
        body = [line for line in (folder / f"{step.script}.sql").read_text().splitlines()
                if line.strip() not in ("BEGIN;", "COMMIT;")]
        parts.append(f"\n-- change: {step.script}")
        parts.extend(body)
    parts.append("COMMIT;")
    return "\n".join(parts) + "\n"


@db.command("sql")
@click.option("--revert", is_flag=True, help="The revert scripts instead (drops the schema).")
def db_sql(revert):
    """Print the whole schema as one psql script (one transaction), for other deploy tools.

    jobfence db sql | psql -X -v ON_ERROR_STOP=1 "$DATABASE_URL" deploys the same objects
    as `jobfence db deploy`, without sqitch's registry (docs/operations.md, "Deploy")."""
    root = schema_root()
    if root is None:
        raise Fail("this jobfence installation carries no schema (no sqitch.plan in the "
                   "package or its checkout): reinstall it from a wheel or the repository",
                   EXIT_SQITCH)
    sys.stdout.write(schema_script(root, revert))
