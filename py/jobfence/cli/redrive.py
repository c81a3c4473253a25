"""``jobfence replay-many``: bulk dead-letter re-drive (``jobs.replay_many``), one
transaction per call, after the fix for a failure has shipped."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import click

from .common import SECONDS, client_for, json_option, json_out, map_errors, utf8_text


class FailedSince(click.ParamType):
    """An ISO 8601 time, or a number of seconds ago: "the last hour" is ``3600``."""

    name = "TIME|SECONDS"

    def convert(self, value, param, ctx):
        if isinstance(value, datetime):
            return value
        text = str(value).strip()
        try:
            seconds = SECONDS.convert(text, param, ctx)
        except click.BadParameter:
            try:
                when = datetime.fromisoformat(text)
            except ValueError:
                self.fail(f"{text!r} is neither an ISO 8601 time nor a number of seconds ago",
                          param, ctx)
            return when if when.tzinfo else when.replace(tzinfo=timezone.utc)
        return datetime.now(timezone.utc) - timedelta(seconds=seconds)


def _filter(ctx, param, value):
    """A bad --kind or --error-like is a usage error whether or not a failed job would meet
    it (jobfence.db.replay_filter_problem)."""
    from ..db import replay_filter_problem

    name = param.name.replace("_", "-")
    value = utf8_text(value, f"--{name}")
    kind, error_like = (value, None) if param.name == "kind" else (None, value)
    problem = replay_filter_problem(kind, error_like)
    if problem:
        raise click.BadParameter(f"{problem[1]} (HINT: {problem[2]})", ctx, param)
    return value


@click.command("replay-many")
@click.option("--kind", default=None, callback=_filter,
              help="Only this kind (default: every kind).")
@click.option("--error-like", default=None, metavar="PATTERN", callback=_filter,
              help="Only jobs whose error matches this LIKE pattern, e.g. '%timeout%'.")
@click.option("--failed-since", type=FailedSince(), default=None,
              help="Only jobs that failed at or after this ISO 8601 time, or this many "
                   "seconds ago.")
@click.option("--max-jobs", default=1000, show_default=True, type=click.IntRange(1, 10_000),
              help="At most this many, oldest failure first; run again for the rest.")
@json_option
@click.pass_context
@map_errors
def replay_many(ctx, kind, error_like, failed_since, max_jobs, as_json):
    """Re-drive failed jobs in bulk, in one transaction: queued again with a fresh retry
    budget, as `jobfence replay` does for one."""
    with client_for(ctx) as client:
        ids = client.replay_many(kind, error_like=error_like, failed_since=failed_since,
                                 max_jobs=max_jobs)
    if as_json:
        json_out({"replayed": len(ids), "ids": ids})
        return
    what = f"kind {kind}" if kind else "every kind"
    if error_like is not None:
        what += f", error like {error_like!r}"
    if failed_since is not None:
        what += f", failed since {failed_since.isoformat(timespec='seconds')}"
    if not ids:
        click.echo(f"no failed jobs matched ({what}); nothing was changed")
        return
    shown = ", ".join(map(str, ids[:20])) + (f", ... ({len(ids) - 20} more)" if len(ids) > 20 else "")
    click.echo(f"replayed {len(ids):,} failed job(s) ({what}): queued again: {shown}")
    if len(ids) == max_jobs:
        click.echo(f"--max-jobs {max_jobs} reached: run again for the rest", err=True)
