"""``jobfence prune``: retention by hand, in bounded slices (each its own transaction), then
the history's day partitions that only pruned jobs had events in are dropped whole."""

from __future__ import annotations

import sys
import time

import click

from .common import POSITIVE_SECONDS, client_for, json_option, json_out, map_errors


@click.command()
@click.option("--older-than", default=7 * 86400.0, show_default=True, type=POSITIVE_SECONDS,
              help="Delete done and failed jobs finished longer ago than this many seconds.")
@click.option("--batch", default=5000, show_default=True, type=click.IntRange(1, 100_000),
              help="Jobs per call of jobs.prune (one transaction each: row locks stay short).")
@json_option
@click.pass_context
@map_errors
def prune(ctx, older_than, batch, as_json):
    """Delete finished jobs, with their history, older than --older-than (jobs.prune, then
    jobs.drop_event_partitions)."""
    started = time.monotonic()
    total = 0
    with client_for(ctx) as client:
        while True:
            pruned = client.db.prune(older_than, batch)
            total += pruned
            if not as_json and sys.stderr.isatty():
                click.echo(f"\rpruned {total:,} jobs  {time.monotonic() - started:5.1f}s\x1b[K",
                           err=True, nl=False)
            if pruned < batch:
                break
        # The partitions ahead too, so a database without a reaper keeps them.
        client.db.create_event_partitions()
        dropped = client.db.drop_event_partitions(older_than)
    seconds = round(time.monotonic() - started, 2)
    if as_json:
        json_out({"pruned": total, "event_partitions_dropped": dropped, "older_than_seconds": older_than,
                  "seconds": seconds})
    else:
        if sys.stderr.isatty():
            click.echo("", err=True)
        click.echo(f"pruned {total:,} finished jobs older than {older_than:g}s and dropped {dropped} "
                   f"event partitions in {seconds}s")
