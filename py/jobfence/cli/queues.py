"""``jobfence pause`` / ``jobfence resume``: stop and restart the claims of one queue."""

from __future__ import annotations

import click

from .common import client_for, json_option, json_out, map_errors


@click.command()
@click.argument("queue")
@json_option
@click.pass_context
@map_errors
def pause(ctx, queue, as_json):
    """Stop claims of QUEUE's jobs (jobs.pause); jobs already running go on."""
    with client_for(ctx) as client:
        changed = client.pause(queue)
    if as_json:
        json_out({"queue": queue, "paused": True, "changed": changed})
    else:
        click.echo(f"paused queue {queue}" if changed else f"queue {queue} was already paused")


@click.command()
@click.argument("queue")
@json_option
@click.pass_context
@map_errors
def resume(ctx, queue, as_json):
    """Let QUEUE's jobs be claimed again (jobs.resume) and signal them at once."""
    with client_for(ctx) as client:
        changed, signalled = client.resume(queue)
    if as_json:
        json_out({"queue": queue, "paused": False, "changed": changed, "signalled": signalled})
    else:
        click.echo((f"resumed queue {queue}" if changed else f"queue {queue} was not paused")
                   + f"; signalled {signalled} job(s)")
