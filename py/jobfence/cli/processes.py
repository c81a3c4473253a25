"""Long-running processes: worker, reaper, relay, and run (all of them, and the API, in one tree)."""

from __future__ import annotations

import os
import sys

import click

from ..app_setup import AppSetupError
from .common import (API_ADMIN_LOGIN_ENV, EXIT_ERROR, EXIT_USAGE, POSITIVE_SECONDS, ROLE_DATABASE_URL_ENV, SECONDS, WEBHOOK_URL,
                     Fail, app_from, cfg, database_url_for, exit_process, map_errors, queues_from,
                     redis_url_for, require_extra, require_schema, setup_logging)
from .metrics import with_metrics_port


def _serve_metrics(port: int | None, host: str, role: str) -> None:
    """Start this process's metrics server (before anything else, so that a port in use
    ends the command at once with a one-line error)."""
    if port is None:
        return
    import logging

    from .. import log as jlog
    from ..observe import process
    from .metrics import listen

    server = listen(port, host)
    process.enable(role)
    jlog.event(process.logger, logging.INFO, "metrics_listening", "serving Prometheus metrics",
               host=host, port=server.server_address[1])


@click.command()
@click.option("--app", "app_ref", required=True, help="The App to serve, as MODULE:ATTR.")
@click.option("--app-dir", default=".", show_default=True,
              help="Put this directory first on the import path before loading --app.")
@click.option("--concurrency", default=32, show_default=True, type=click.IntRange(1, 4096),
              help="Handlers in flight: sync handlers on this many threads, async handlers "
                   "this many at a time on the event loop.")
@click.option("--batch", type=click.IntRange(1, 10000), default=100, show_default=True,
              help="Ids popped and claimed per round trip; also the outcomes reported per "
                   "round trip.")
@click.option("--prefetch", type=click.IntRange(0, 100000), default=None,
              help="Jobs that may be claimed beyond the handler slots, waiting (heartbeated) "
                   "for a handler [default: enough for a whole batch to wait while the one "
                   "before it runs: --batch + the part of a batch the handlers cannot start "
                   "at once, 168 with the defaults].")
@click.option("--processes", type=click.IntRange(1, 256), default=None,
              help="Child processes for kinds declared with executor='process' "
                   "[default: min(--concurrency, CPUs)].")
@click.option("--queue", "queues", multiple=True, help="Queue to serve (repeatable) "
              "[default: the queues of the app's kinds].")
@click.option("--name", default=None, help="Worker id written to owned_by [default: host:pid].")
@click.option("--grace", default=30.0, show_default=True, type=SECONDS,
              help="Seconds in-flight jobs get to finish after SIGTERM/SIGINT.")
@click.option("--pop-timeout", default=1.0, show_default=True, type=POSITIVE_SECONDS,
              help="Seconds a blocking pop waits (bounds shutdown latency).")
@click.option("--no-declare", is_flag=True, help="Do not call jobs.define_type at start.")
@click.option("--declare-only", is_flag=True,
              help="Declare the app with --database-url and exit: its kinds "
                   "(jobs.define_type, a jobs_admin right) and what its start hooks create; "
                   "for workers that log in as jobs_worker and run --no-declare.")
@with_metrics_port
@click.pass_context
def worker(ctx, app_ref, app_dir, concurrency, batch, prefetch, processes, queues, name, grace,
           pop_timeout, no_declare, declare_only, metrics_port, metrics_host):
    """Run handlers: pop ids, claim, run, complete or fail — in batches."""
    from ..worker import Worker, default_name
    from ..worker.core import settle_collector

    if declare_only and no_declare:
        raise Fail("--declare-only and --no-declare contradict each other: pick one", EXIT_USAGE)
    app = app_from(app_ref, app_dir, serving=True)
    if declare_only:
        _declare(cfg(ctx)["database_url"], app)
        return

    require_schema(database_url_for(ctx, "worker"))
    name = name or default_name()
    setup_logging(ctx, "worker", worker=name)
    _serve_metrics(metrics_port, metrics_host, "worker")
    w = Worker(app, database_url_for(ctx, "worker"), redis_url_for(ctx), name=name,
               concurrency=concurrency, batch=batch, prefetch=prefetch, processes=processes,
               queues=list(queues) or None, grace=grace, pop_timeout=pop_timeout,
               declare=not no_declare)
    if metrics_port is not None:
        from ..observe.process import watch_worker

        watch_worker(w)
    w.install_signal_handlers()
    settle_collector()
    exit_process(w.run())


@map_errors
def _declare(database_url: str, app) -> None:
    from ..db import Database

    db = Database(database_url, max_size=1, open_timeout=5.0, timeout=5.0)
    try:
        # Not App.declare: that one shrugs off a refused define_type, which a worker may.
        for task in app.tasks.values():
            db.define_type(task.kind, **task.options)
        try:
            # The administrator declares; the workers' login is the one that writes.
            app.prepare(db, create=True, for_handlers=False)
        except AppSetupError as exc:
            raise Fail(str(exc), EXIT_ERROR) from None
        app.declare_schedules(db)
    finally:
        db.close()
    click.echo(f"declared {len(app.tasks)} kinds: {', '.join(sorted(app.tasks))}")
    if app.periodics:
        click.echo(f"declared {len(app.periodics)} schedules: {', '.join(sorted(app.periodics))}")


# LISTEN keeps a session, which a transaction pooler does not give (docs/scaling.md).
LISTEN_URL_OPTION = click.option(
    "--listen-database-url", default=None, envvar="JOBFENCE_LISTEN_DATABASE_URL",
    help="A direct PostgreSQL URL for the LISTEN connection, needed when the database URL "
         "goes through a transaction pooler [env JOBFENCE_LISTEN_DATABASE_URL].")


def _listen_url(ctx, role: str, given: str | None, who: str) -> str:
    from ..db import InvalidDatabaseUrl, InvalidPooler, listen_url

    try:
        return listen_url(database_url_for(ctx, role), given, who)
    except (InvalidPooler, InvalidDatabaseUrl) as exc:
        raise Fail(str(exc), EXIT_USAGE) from None


def _serve(component) -> None:
    import signal

    def on_signal(_signum, _frame):
        component.stop()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    exit_process(component.run())


@click.command()
@click.option("--interval", default=5.0, show_default=True, type=POSITIVE_SECONDS, help="Seconds between ticks.")
@click.option("--stale-after", default=5.0, show_default=True, type=SECONDS,
              help="Re-push claimable jobs untouched this long when their ready list is empty.")
@click.option("--queue", "queues", multiple=True, help="Queue to watch (repeatable).")
@click.option("--app", "app_ref", default=None, help="Also watch the queues of this App.")
@click.option("--batch", default=1000, show_default=True, type=click.IntRange(1, 100000))
@click.option("--dead-letter-webhook", default=None, type=WEBHOOK_URL,
              envvar="JOBFENCE_DEAD_LETTER_WEBHOOK",
              help="POST a page for every dead letter (JSON, at least once, a stable "
                   "Jobfence-Page-Id) to this http(s) URL, retried until delivered "
                   "[env JOBFENCE_DEAD_LETTER_WEBHOOK].")
@click.option("--dead-letter-timeout", default=5.0, show_default=True, type=POSITIVE_SECONDS,
              help="Seconds one POST of a page may take.")
@click.option("--dead-letter-retry-base", default=1.0, show_default=True, type=POSITIVE_SECONDS,
              help="Seconds before a failed page is retried; doubles per attempt.")
@click.option("--dead-letter-retry-max", default=300.0, show_default=True, type=POSITIVE_SECONDS,
              help="The longest wait between two attempts of a page.")
@click.option("--retain", default=7 * 86400.0, show_default=True, type=POSITIVE_SECONDS,
              help="Prune done and failed jobs (with their history) finished longer ago than "
                   "this many seconds, --batch at a time.")
@click.option("--no-retention", is_flag=True, help="Keep every finished job (prune by hand).")
@click.option("--no-schedules", is_flag=True,
              help="Do not enqueue the ticks of periodic jobs (jobs.schedules); another "
                   "reaper does.")
@LISTEN_URL_OPTION
@with_metrics_port
@click.pass_context
def reaper(ctx, interval, stale_after, queues, app_ref, batch, dead_letter_webhook,
           dead_letter_timeout, dead_letter_retry_base, dead_letter_retry_max, retain,
           no_retention, no_schedules, listen_database_url, metrics_port, metrics_host):
    """Reap expired leases, recover enqueue_failed, move due retries, re-push lost signals."""
    from ..reaper import Reaper

    require_schema(database_url_for(ctx, "reaper"))
    if dead_letter_webhook:
        listen_database_url = _listen_url(ctx, "reaper", listen_database_url,
                                          "the reaper's dead-letter forwarder")
    setup_logging(ctx, "reaper")
    _serve_metrics(metrics_port, metrics_host, "reaper")
    _serve(Reaper(database_url_for(ctx, "reaper"), redis_url_for(ctx), interval=interval,
                  stale_after=stale_after, queues=queues_from(app_ref, queues), batch=batch,
                  dead_letter_webhook=dead_letter_webhook, dead_letter_timeout=dead_letter_timeout,
                  dead_letter_retry_base=dead_letter_retry_base,
                  dead_letter_retry_max=dead_letter_retry_max,
                  retain=None if no_retention else retain, schedules=not no_schedules,
                  listen_database_url=listen_database_url))


@click.command()
@click.option("--poll-interval", default=5.0, show_default=True, type=POSITIVE_SECONDS,
              help="Seconds between polls while the LISTEN connection is down.")
@click.option("--stale-after", default=5.0, show_default=True, type=SECONDS)
@click.option("--queue", "queues", multiple=True, help="Queue to poll (repeatable).")
@click.option("--app", "app_ref", default=None, help="Also poll the queues of this App.")
@click.option("--table-poll", default=0.01, show_default=True, type=POSITIVE_SECONDS,
              help="Seconds between reads of new jobs while submits do not notify "
                   "(jobs.configure_relay('table')).")
@LISTEN_URL_OPTION
@with_metrics_port
@click.pass_context
def relay(ctx, poll_interval, stale_after, queues, app_ref, table_poll, listen_database_url,
          metrics_port, metrics_host):
    """Push the ids that SQL producers announce on jobs_submitted, or that it reads from
    the table while submits do not notify."""
    from ..relay import Relay

    require_schema(database_url_for(ctx, "relay"))
    listen_database_url = _listen_url(ctx, "relay", listen_database_url, "the relay")
    setup_logging(ctx, "relay")
    _serve_metrics(metrics_port, metrics_host, "relay")
    _serve(Relay(database_url_for(ctx, "relay"), redis_url_for(ctx), poll_interval=poll_interval,
                 stale_after=stale_after, queues=queues_from(app_ref, queues),
                 listen_database_url=listen_database_url, table_poll=table_poll))


@click.command()
@click.option("--app", "app_ref", default="jobfence.examples:app", show_default=True)
@click.option("--workers", default=2, show_default=True, type=click.IntRange(1, 64))
@click.option("--concurrency", default=32, show_default=True, type=click.IntRange(1, 4096),
              help="Handlers in flight per worker.")
@click.option("--batch", type=click.IntRange(1, 10000), default=100, show_default=True,
              help="Ids claimed (and outcomes reported) per round trip, per worker.")
@click.option("--reaper-interval", default=5.0, show_default=True, type=POSITIVE_SECONDS)
@click.option("--stale-after", default=5.0, show_default=True, type=SECONDS)
@click.option("--grace", default=30.0, show_default=True, type=SECONDS)
@click.option("--queue", "queues", multiple=True)
@click.option("--metrics-port", type=click.IntRange(0, 65535 - 65), default=None,
              help="Metrics of the relay on this port, the reaper on the next, worker N on "
                   "port + 1 + N (0: any free ports) [default: off].")
@click.option("--metrics-host", default="127.0.0.1", show_default=True)
@click.option("--dead-letter-webhook", default=None, type=WEBHOOK_URL,
              envvar="JOBFENCE_DEAD_LETTER_WEBHOOK", help="Passed to the reaper.")
@click.option("--api-port", default=8000, show_default=True, type=click.IntRange(0, 65535),
              help="Port of the HTTP API child (jobfence api; 0: any free port).")
@click.option("--api-host", default="127.0.0.1", show_default=True,
              help="Address the HTTP API listens on.")
@click.option("--no-api", is_flag=True, help="Do not start the HTTP API.")
@click.option("--no-declare", is_flag=True,
              help="Workers do not call jobs.define_type (an administrator declared the kinds).")
@click.pass_context
def run(ctx, app_ref, workers, concurrency, batch, reaper_interval, stale_after, grace, queues,
        metrics_port, metrics_host, dead_letter_webhook, api_port, api_host, no_api, no_declare):
    """Relay + reaper + N workers + the HTTP API in one process tree (for a laptop)."""
    from ..runner import build_children
    from ..supervisor import Supervisor
    from .api import TOKENS_ENV, api_tokens, host_policy, is_loopback

    if not no_api:
        require_extra("api", "run (the HTTP API child; --no-api runs without it)")

    # Without tokens the API may only serve unauthenticated on a loopback address: refuse
    # here, once, rather than let the child exit and be restarted forever. Likewise a token
    # or an allowed host the child could not read.
    api_no_auth = not no_api and not os.environ.get(TOKENS_ENV, "").strip()
    if api_no_auth and not is_loopback(api_host):
        raise Fail(f"--api-host {api_host} is not a loopback address and {TOKENS_ENV} is "
                   "unset: set tokens, listen on 127.0.0.1, or pass --no-api", EXIT_USAGE)
    if not no_api:
        api_tokens()
        host_policy(api_host, no_auth=api_no_auth)
    # A mistake in --app or a missing schema is one line now, not a restart loop of children
    # that cannot start.
    app_from(app_ref, serving=True)
    require_schema(cfg(ctx)["database_url"])
    setup_logging(ctx, "run")
    conf = cfg(ctx)
    # URLs travel in the environment, never in argv (which /proc/PID/cmdline shows). Each
    # child gets the one URL of its role and none of the others' credentials.
    env = {k: v for k, v in os.environ.items()
           if k not in ROLE_DATABASE_URL_ENV.values() and k not in API_ADMIN_LOGIN_ENV}
    env["JOBFENCE_REDIS_URL"] = redis_url_for(ctx)
    role_urls = {role: database_url_for(ctx, role) for role in ROLE_DATABASE_URL_ENV}
    # The API's admin login (and its password) reaches the API child only.
    api_admin = {k: os.environ[k] for k in API_ADMIN_LOGIN_ENV if os.environ.get(k, "").strip()}
    if dead_letter_webhook:
        env["JOBFENCE_DEAD_LETTER_WEBHOOK"] = dead_letter_webhook
    children = build_children(app=app_ref, workers=workers, concurrency=concurrency, batch=batch,
                              log_format=conf["log_format"], log_level=conf["log_level"],
                              reaper_interval=reaper_interval, stale_after=stale_after,
                              grace=grace, queues=list(queues), metrics_port=metrics_port,
                              metrics_host=metrics_host, api_port=None if no_api else api_port,
                              api_host=api_host, api_no_auth=api_no_auth,
                              role_urls=role_urls, declare=not no_declare, api_env=api_admin)
    sys.exit(Supervisor(children, env=env, grace=grace).run())


