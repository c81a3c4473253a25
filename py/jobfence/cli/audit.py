"""``jobfence audit``: the invariants checked over the recorded history (docs/reliability.md)."""

from __future__ import annotations

import sys
import time

import click

from .common import EXIT_ERROR, POSITIVE_SECONDS, cfg, json_option, json_out, map_errors, table


@click.command()
@click.option("--reaper-interval", default=5.0, show_default=True, type=POSITIVE_SECONDS,
              help="The --interval the reapers run with: a lease more than two of them past "
                   "its expiry is a violation.")
@click.option("--examples", default=10, show_default=True, type=click.IntRange(0, 1000),
              help="Job ids listed per violated check.")
@json_option
@click.pass_context
@map_errors
def audit(ctx, reaper_interval, examples, as_json):
    """Check every invariant over jobs.job and jobs.event; exit 1 if any is violated."""
    from ..db import Database

    if not as_json and sys.stderr.isatty():
        click.echo("auditing jobs.job and jobs.event (one pass over the history)...", err=True)
    started = time.monotonic()
    db = Database(cfg(ctx)["database_url"], max_size=1, open_timeout=3.0)
    try:
        rows = db.audit(reaper_interval, examples)
    finally:
        db.close()
    seconds = time.monotonic() - started
    broken = [r for r in rows if r["violations"]]
    if as_json:
        json_out({"ok": not broken, "seconds": round(seconds, 3), "checks": rows})
    else:
        click.echo(table(["check", "violations", "example jobs", "invariant"],
                         [[r["check_name"], r["violations"],
                           " ".join(map(str, r["example_job_ids"])) or "-", r["description"]]
                          for r in rows]))
        click.echo(f"{'clean' if not broken else f'{len(broken)} check(s) violated'} "
                   f"({seconds:.1f} s); `jobfence status ID` shows a job's history")
    if broken:
        sys.exit(EXIT_ERROR)
