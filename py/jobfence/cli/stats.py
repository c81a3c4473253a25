"""Looking at the service: stats (one report) and top (a live view)."""

from __future__ import annotations

import logging
import sys

import click

from .common import (POSITIVE_SECONDS, json_option, json_out, map_errors,
                     read_database_url_for, require_extra, table)


def _target(url: str) -> str:
    """host:port/dbname, never the password."""
    from psycopg.conninfo import conninfo_to_dict

    try:
        info = conninfo_to_dict(url)
    except Exception:  # noqa: BLE001 - only a label; the connection reports a bad URL
        return "PostgreSQL"
    host = info.get("host") or "localhost"
    port = info.get("port") or "5432"
    return f"{host}:{port}/{info.get('dbname') or info.get('user') or ''}"


def _paused(ctx: click.Context) -> dict[str, dict]:
    """The paused queues by name (``jobs.paused_queues``)."""
    from ..db import Database

    db = Database(read_database_url_for(ctx), max_size=1, name="jobfence-stats")
    try:
        return {r["queue"]: r for r in db.paused_queues()}
    finally:
        db.close()


def _reader(ctx: click.Context):
    from ..dashboard import Reader

    return Reader(read_database_url_for(ctx))


@click.command()
@click.option("--since", default=3600.0, show_default=True, type=POSITIVE_SECONDS,
              help="Window of the per-kind figures, in seconds (whole minutes are read).")
@json_option
@click.pass_context
@map_errors
def stats(ctx, since, as_json):
    """Backlog per queue and kind now; counts, rates and SLOs per kind over --since."""
    from ..dashboard import depth_table, kinds_table
    from ..dashboard.view import window_caption

    with _reader(ctx) as reader:
        snap = reader.read(since)
    paused = _paused(ctx)
    if as_json:
        json_out({**snap.to_json(), "paused_queues": [
            {"queue": q, "paused_at": r["paused_at"].isoformat(), "paused_by": r["paused_by"]}
            for q, r in paused.items()]})
        return
    depth, kinds = depth_table(snap), kinds_table(snap)
    click.echo("queues (now)")
    # Paused: its jobs are not claimed until `jobfence resume QUEUE`. The column is there only
    # while some queue is paused, so the usual report keeps its shape.
    rows = depth.text_rows()
    headers = depth.headers
    if paused:
        rows = [row + ["paused" if row[0] in paused else ""] for row in rows]
        headers = headers + ["state"]
    click.echo(table(headers, rows) if depth.rows else "no queues and no declared kinds")
    unlisted = sorted(set(paused) - {row[0] for row in rows})
    if unlisted:
        click.echo("paused, holding no job: " + ", ".join(unlisted))
    click.echo("")
    click.echo(f"kinds over the {window_caption(snap)}")
    click.echo(table(kinds.headers, kinds.text_rows()) if kinds.rows else "no kinds")
    if depth.any_alert or kinds.any_alert:
        click.echo("\n! outside its objective or alert bound (see docs/observability.md)")


@click.command()
@click.option("--interval", default=2.0, show_default=True, type=POSITIVE_SECONDS,
              help="Seconds between refreshes (at least 0.1).")
@click.option("--since", default=300.0, show_default=True, type=POSITIVE_SECONDS,
              help="Window of the per-kind figures, in seconds (whole minutes are read).")
@click.pass_context
def top(ctx, interval, since):
    """Live view of queues, rates, p95 against budget and SLO burn; q or ctrl+c quits."""
    require_extra("top", "top")
    if interval < 0.1:
        raise click.BadParameter("must be at least 0.1 seconds", param_hint="--interval")
    if not (sys.stdout.isatty() and sys.stdin.isatty()):
        raise click.UsageError("top needs a terminal (stdin and stdout must be a tty); use "
                               "`jobfence stats` or `jobfence stats --json` for a report",
                               ctx=ctx)
    reader = _reader(ctx)
    read = map_errors(lambda: reader.read(since))
    try:
        # Unreachable, not deployed, a window out of range: said once, before the screen
        # is taken over.
        first = read()
        from ..dashboard.tui import TopApp

        # The screen belongs to the app; log records would scribble over it.
        logging.getLogger("psycopg").addHandler(logging.NullHandler())
        logging.getLogger("psycopg").propagate = False
        TopApp(read, first, interval=interval, target=_target(reader.url)).run()
    finally:
        reader.close()
