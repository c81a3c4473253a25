"""``jobfence schedules``, ``jobfence schedule`` and ``jobfence unschedule``: periodic jobs."""

from __future__ import annotations

import click

from .common import EXIT_NOT_FOUND, Fail, client_for, json_option, json_out, map_errors, table
from .jobs import _parse_payload

COLUMNS = ["name", "cron", "timezone", "kind", "missed", "enabled", "last_tick", "last_job_id",
           "next_tick"]


class CronText(click.ParamType):
    """A cron text the ticker can read: refused here (exit 2) rather than stored and then
    skipped at every tick."""

    name = "CRON"

    def convert(self, value, param, ctx):
        from ..schedules import ScheduleError, check

        try:
            return check(value)
        except ScheduleError as exc:
            self.fail(str(exc), param, ctx)


class TimeZoneName(click.ParamType):
    name = "ZONE"

    def convert(self, value, param, ctx):
        from ..schedules import ScheduleError, zone

        try:
            zone(value)
        except ScheduleError as exc:
            self.fail(str(exc), param, ctx)
        return value


def schedule_dict(row: dict) -> dict:
    return {k: v for k, v in row.items() if k != "created"}


@click.command("schedules")
@json_option
@click.pass_context
@map_errors
def list_schedules(ctx, as_json):
    """List periodic jobs: timetable, last tick enqueued and next tick (jobs.schedules)."""
    with client_for(ctx) as client:
        found = client.schedules()
    if as_json:
        json_out({"schedules": [schedule_dict(r) for r in found]})
        return
    if not found:
        click.echo("no schedules", err=True)
        return
    click.echo(table(COLUMNS, [[r[c] for c in COLUMNS] for r in found]))


@click.command("schedule")
@click.argument("name")
@click.argument("cron", type=CronText())
@click.argument("kind")
@click.option("--payload", default=None,
              help="The job's payload: a JSON object, @FILE or - (stdin) [default: {}].")
@click.option("--timezone", "timezone_name", default="UTC", show_default=True, type=TimeZoneName(),
              help="The time zone the cron text is read in, e.g. Europe/Paris.")
@click.option("--missed", default="once", show_default=True, type=click.Choice(["once", "skip"]),
              help="After downtime: enqueue the latest missed tick (once), or none (skip).")
@click.option("--enable/--disable", "enabled", default=None,
              help="Enable or disable [default: keep as stored; new schedules are enabled].")
@json_option
@click.pass_context
@map_errors
def schedule(ctx, name, cron, kind, payload, timezone_name, missed, enabled, as_json):
    """Create or replace the periodic job NAME: a KIND job at every tick of CRON.

    CRON has 5 fields (minute hour day-of-month month day-of-week) or 6 with seconds first;
    quote it: jobfence schedule nightly '0 3 * * *' cleanup."""
    body = _parse_payload(payload)
    with client_for(ctx) as client:
        stored = client.schedule(name, cron, kind, body, timezone=timezone_name, missed=missed,
                                 enabled=enabled)
    if as_json:
        json_out({"schedule": schedule_dict(stored), "created": bool(stored["created"])})
        return
    verb = "scheduled" if stored["created"] else "replaced"
    state = "" if stored["enabled"] else " (disabled)"
    click.echo(f"{verb} {stored['name']}: {stored['kind']} at '{stored['cron']}' "
               f"({stored['timezone']}, missed={stored['missed']}){state}")


@click.command("unschedule")
@click.argument("name")
@json_option
@click.pass_context
@map_errors
def unschedule(ctx, name, as_json):
    """Delete the periodic job NAME (the jobs it enqueued stay). Exit 3 if there is none."""
    with client_for(ctx) as client:
        removed = client.unschedule(name)
    if not removed:
        raise Fail(f"not found: no schedule named {name!r} (jobfence schedules lists them)",
                   EXIT_NOT_FOUND)
    if as_json:
        json_out({"name": name, "removed": True})
        return
    click.echo(f"unscheduled {name}")
