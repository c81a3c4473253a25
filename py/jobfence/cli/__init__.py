"""The ``jobfence`` command line. See docs/cli.md for every command and exit code."""

from __future__ import annotations

import click

from .. import __version__
from .api import api
from .audit import audit
from .grants import grants
from .common import DEFAULT_DATABASE_URL, DEFAULT_REDIS_URL
from .jobs import cancel, demo, replay, status, submit
from .listing import list_jobs
from .retention import prune
from .schedules import list_schedules, schedule, unschedule
from .redrive import replay_many
from .metrics import metrics
from .pages import pages
from .processes import reaper, relay, run, worker
from .queues import pause, resume
from .schema import db
from .stats import stats, top


class Commands(click.Group):
    """The built-in commands, and those another installed package adds through the entry
    point group ``jobfence.commands`` (the chaos harness adds ``jobfence chaos``). The entry
    points are read only for a name that is not built in, and for --help."""

    @staticmethod
    def _added() -> dict:
        from importlib.metadata import entry_points

        return {ep.name: ep for ep in entry_points(group="jobfence.commands")}

    def get_command(self, ctx, name):
        found = super().get_command(ctx, name)
        if found is not None:
            return found
        added = self._added().get(name)
        return added.load() if added is not None else None

    def list_commands(self, ctx):
        return sorted(set(super().list_commands(ctx)) | set(self._added()))


@click.group(cls=Commands, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option("--database-url", envvar="JOBFENCE_DATABASE_URL", default=DEFAULT_DATABASE_URL,
              show_default=True, help="PostgreSQL URL [env JOBFENCE_DATABASE_URL].")
@click.option("--read-database-url", envvar="JOBFENCE_READ_DATABASE_URL", default=None,
              help="Where stats, top and the exporter read, e.g. a hot standby "
                   "[env JOBFENCE_READ_DATABASE_URL; default: --database-url].")
@click.option("--redis-url", envvar="JOBFENCE_REDIS_URL", default=DEFAULT_REDIS_URL,
              show_default=True, help="Redis URL [env JOBFENCE_REDIS_URL].")
@click.option("--log-format", type=click.Choice(["text", "json"]), envvar="JOBFENCE_LOG_FORMAT",
              default="text", show_default=True, help="Log lines on stderr [env JOBFENCE_LOG_FORMAT].")
@click.option("--log-level", type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"],
              case_sensitive=False), envvar="JOBFENCE_LOG_LEVEL", default="INFO", show_default=True,
              help="Lowest level logged on stderr [env JOBFENCE_LOG_LEVEL].")
@click.version_option(__version__, prog_name="jobfence")
@click.pass_context
def main(ctx: click.Context, database_url: str, read_database_url: str | None, redis_url: str,
         log_format: str, log_level: str):
    """jobfence: async jobs whose truth lives in PostgreSQL; Redis carries wake-up signals.

    Behind a transaction-mode pooler (PgBouncer) set JOBFENCE_DATABASE_POOLER=transaction,
    and give LISTENing processes a direct JOBFENCE_LISTEN_DATABASE_URL (docs/scaling.md)."""
    from ..db import InvalidPooler, pooler

    try:
        pooler()
    except InvalidPooler as exc:
        raise click.UsageError(str(exc)) from None
    ctx.obj = {"database_url": database_url, "read_database_url": read_database_url,
               "redis_url": redis_url,
               "log_format": log_format, "log_level": log_level.upper()}


for command in (worker, reaper, relay, run, api, submit, status, cancel, replay, list_jobs, demo,
                prune, stats, top, metrics, audit, db, replay_many,
                list_schedules, schedule, unschedule, pause, resume, grants, pages):
    main.add_command(command)
