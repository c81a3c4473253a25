"""``jobfence jobs``: list jobs newest first, a keyset page at a time."""

from __future__ import annotations

import click

from .common import client_for, json_option, json_out, job_dict, map_errors, table

STATUSES = ("queued", "processing", "enqueue_failed", "done", "failed")


@click.command("jobs")
@click.option("--kind", default=None, help="Only jobs of this kind.")
@click.option("--status", default=None, type=click.Choice(STATUSES), help="Only jobs in this status.")
@click.option("--queue", default=None, help="Only jobs of this queue.")
@click.option("--ordering-key", default=None, help="Only jobs of this ordering key (any status).")
@click.option("--limit", default=20, show_default=True, type=click.IntRange(1, 1000),
              help="Jobs per page.")
@click.option("--before", "before_id", default=None, type=click.IntRange(1, 2**63 - 1),
              help="Page on: the last id of the previous page (its `next page` line says it).")
@json_option
@click.pass_context
@map_errors
def list_jobs(ctx, kind, status, queue, ordering_key, limit, before_id, as_json):
    """List jobs, newest first (keyset pages: as fast on the millionth page as on the first)."""
    with client_for(ctx) as client:
        # One row more than the page tells whether a next page exists (list_jobs allows 1000).
        found = client.db.list_jobs(kind=kind, status=status, queue=queue, before_id=before_id,
                                    max_jobs=min(limit + 1, 1000), ordering_key=ordering_key)
    more = len(found) > limit or (limit == 1000 and len(found) == 1000)
    found = found[:limit]
    following = found[-1].id if more else None
    if as_json:
        json_out({"jobs": [job_dict(j) for j in found], "next_before": following})
        return
    if not found:
        click.echo("no jobs" + (" on this page" if before_id else ""), err=True)
        return
    click.echo(table(["id", "kind", "queue", "status", "attempts", "created_at", "finished_at", "error"],
                     [[j.id, j.kind, j.queue, j.status, attempts(j), j.created_at, j.finished_at,
                       _short(j.error)] for j in found]))
    if following:
        click.echo(f"next page: --before {following}", err=True)


def attempts(job) -> int:
    """Attempts made: the failed ones (retry_count; replay resets it) and the running or
    successful one. The one count `status` and `jobs` both show."""
    return job.retry_count + (1 if job.status in ("processing", "done") else 0)


def _short(text: str | None, width: int = 60) -> str | None:
    if text is None:
        return None
    line = " ".join(text.split())
    return line if len(line) <= width else line[: width - 1] + "…"
