"""``jobfence pages``: the dead-letter pages the webhook has not taken yet, and why."""

from __future__ import annotations

from datetime import datetime, timezone

import click

from .common import client_for, json_option, json_out, map_errors, table


def _ago(value: datetime | None) -> str:
    if value is None:
        return "-"
    seconds = (datetime.now(timezone.utc) - value).total_seconds()
    if seconds < 0:
        return f"in {-seconds:.0f}s"
    return f"{seconds:.0f}s ago" if seconds < 3600 else f"{seconds / 3600:.1f}h ago"


@click.command("pages")
@click.option("--all", "show_all", is_flag=True,
              help="Also the latest delivered pages, after the undelivered ones.")
@click.option("--limit", default=100, show_default=True, type=click.IntRange(1, 10000),
              help="Pages of each kind (undelivered, delivered) to show.")
@json_option
@click.pass_context
@map_errors
def pages(ctx, show_all, limit, as_json):
    """List dead-letter pages not delivered to the webhook yet: attempts, next try, last error.

    Every dead letter has a page (jobs.page), delivered at least once by the reapers given
    --dead-letter-webhook and never given up; exit 0 whatever is waiting."""
    with client_for(ctx) as client:
        rows = client.db.pages(undelivered_only=not show_all, max_pages=limit)
        backlog = client.db.page_backlog()
    if as_json:
        # json_out writes timestamps in ISO 8601, as every --json of the CLI.
        json_out({"undelivered": int(backlog["undelivered"]), "failing": int(backlog["failing"]),
                  "oldest_at": backlog["oldest_at"], "pages": rows})
        return
    waiting = int(backlog["undelivered"])
    if waiting:
        click.echo(f"{waiting} page(s) undelivered, {int(backlog['failing'])} of them failing; "
                   f"oldest written {_ago(backlog['oldest_at'])}", err=True)
    else:
        click.echo("every dead-letter page is delivered", err=True)
    if not rows:
        return
    click.echo(table(
        ["page", "job", "kind", "reason", "failed_at", "attempts", "state", "next try", "last error"],
        [[r["id"], r["job_id"], r["kind"], r["reason"], r["failed_at"], r["attempts"],
          "delivered" if r["delivered_at"] else ("failing" if r["attempts"] else "waiting"),
          "-" if r["delivered_at"] else _ago(r["due_at"]),
          " ".join((r["last_error"] or "-").split())[:60]] for r in rows]))
