"""``jobfence audit``: the invariants checked over the recorded history (docs/reliability.md),
and, with Redis, that no claimable job is left unsignalled past the resignal bound."""

from __future__ import annotations

import sys
import time

import click
import redis

from .. import redis_urls
from .common import (EXIT_ERROR, EXIT_UNAVAILABLE, POSITIVE_SECONDS, SECONDS, Fail, cfg,
                     json_option, json_out, map_errors, redis_url_for, table)


def _redis_failed(exc: redis.RedisError) -> Fail:
    if isinstance(exc, (redis.ConnectionError, redis.TimeoutError)):
        return Fail(f"Redis unavailable: {exc} (--no-redis audits PostgreSQL alone)", EXIT_UNAVAILABLE)
    return Fail(f"Redis error: {exc}", EXIT_ERROR)


def _redis(url: str) -> redis.Redis:
    """A client that answered a PING: an unreachable Redis is reported before the long
    PostgreSQL pass, not after it."""
    client = redis_urls.connect(url, socket_timeout=10.0, socket_connect_timeout=3.0)
    try:
        client.ping()
    except redis.RedisError as exc:
        client.close()
        raise _redis_failed(exc) from None
    return client


@click.command()
@click.option("--reaper-interval", default=5.0, show_default=True, type=POSITIVE_SECONDS,
              help="The --interval the reapers run with: a lease more than two of them past "
                   "its expiry is a violation.")
@click.option("--stale-after", default=5.0, show_default=True, type=SECONDS,
              help="The reapers' --stale-after: a claimable job untouched and due for longer "
                   "than this plus two reaper intervals must be signalled in Redis.")
@click.option("--no-redis", is_flag=True,
              help="Skip the Redis check (signalled): audit PostgreSQL alone.")
@click.option("--examples", default=10, show_default=True, type=click.IntRange(0, 1000),
              help="Job ids listed per violated check.")
@json_option
@click.pass_context
@map_errors
def audit(ctx, reaper_interval, stale_after, no_redis, examples, as_json):
    """Check every invariant over jobs.job and jobs.event, and that every claimable job is
    signalled in Redis; exit 1 if any is violated."""
    from ..db import Database
    from ..signal_audit import check_signals, resignal_bound

    conf = cfg(ctx)
    client = None if no_redis else _redis(redis_url_for(ctx))
    if not as_json and sys.stderr.isatty():
        click.echo("auditing jobs.job and jobs.event (one pass over the history)"
                   f"{'' if no_redis else ', then the Redis signals'}...", err=True)
    started = time.monotonic()
    try:
        db = Database(conf["database_url"], max_size=1, open_timeout=3.0)
        try:
            rows = db.audit(reaper_interval, examples)
        finally:
            db.close()
        if client is not None:
            try:
                rows.append(check_signals(conf["database_url"], client,
                                          resignal_bound(stale_after, reaper_interval), examples))
            except redis.RedisError as exc:
                raise _redis_failed(exc) from None
    finally:
        if client is not None:
            client.close()
    seconds = time.monotonic() - started
    broken = [r for r in rows if r["violations"]]
    if as_json:
        json_out({"ok": not broken, "seconds": round(seconds, 3), "redis": client is not None,
                  "checks": rows})
    else:
        click.echo(table(["check", "violations", "example jobs", "invariant"],
                         [[r["check_name"], r["violations"],
                           " ".join(map(str, r["example_job_ids"])) or "-", r["description"]]
                          for r in rows]))
        click.echo(f"{'clean' if not broken else f'{len(broken)} check(s) violated'} "
                   f"({seconds:.1f} s{', Redis not checked' if client is None else ''}); "
                   "`jobfence status ID` shows a job's history")
    if broken:
        sys.exit(EXIT_ERROR)
