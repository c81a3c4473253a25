"""``jobfence metrics``: the Prometheus exporter of the database's numbers."""

from __future__ import annotations

import logging
import signal
import threading

import click

from .common import (EXIT_UNAVAILABLE, EXIT_USAGE, Fail, exit_process, read_database_url_for,
                     setup_logging)

# jobs.metrics reads whole minutes and refuses windows beyond 400 days.
MIN_WINDOW, MAX_WINDOW = 60, 400 * 86400


def listen(port: int, host: str, registry=None):
    """Serve ``registry`` (the process's default one when None) or exit with a one-line
    error: an exporter that cannot listen is useless, and a traceback helps no one."""
    from ..observe.http import ListenError, serve

    try:
        return serve(port, host) if registry is None else serve(port, host, registry)
    except ListenError as exc:
        raise Fail(str(exc), EXIT_USAGE) from None


metrics_port_options = [
    click.option("--metrics-port", type=click.IntRange(0, 65535), default=None,
                 help="Serve this process's Prometheus metrics on this port (0: any free "
                      "port, logged in metrics_listening) [default: off]."),
    click.option("--metrics-host", default="127.0.0.1", show_default=True,
                 help="Address the metrics port listens on (0.0.0.0 for every interface)."),
]


def with_metrics_port(fn):
    for option in reversed(metrics_port_options):
        fn = option(fn)
    return fn


@click.command()
@click.option("--port", type=click.IntRange(0, 65535), default=None,
              help="Port to serve /metrics on (0: any free port, logged in exporter_ready) "
                   "[required unless --once].")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to listen on (0.0.0.0 for every interface).")
@click.option("--window", type=click.IntRange(MIN_WINDOW, MAX_WINDOW), default=300,
              show_default=True, metavar="SECONDS",
              help="Window of the jobs.metrics numbers (labelled window=\"5m\" etc.).")
@click.option("--burn-window", "burn_windows", type=click.IntRange(MIN_WINDOW, MAX_WINDOW),
              multiple=True, metavar="SECONDS",
              help="Another window for SLO burn rates (repeatable), besides 1800, 3600 and 21600, which the alert rules need and are always served.")
@click.option("--once", is_flag=True,
              help="Print one scrape on stdout and exit (0 if it read PostgreSQL, 6 if it could not).")
@click.pass_context
def metrics(ctx, port, host, window, burn_windows, once):
    """Prometheus exporter: queue depth and per-kind SLO numbers read from PostgreSQL."""
    from .. import log as jlog
    from ..db import Database
    from ..observe.exporter import DEFAULT_BURN_WINDOWS, logger, registry_for, window_label

    if port is None and not once:
        raise click.UsageError("Missing option '--port' (or --once for a single scrape).")
    setup_logging(ctx, "exporter")
    # A scrape must answer within Prometheus's scrape timeout (10 s by default) even when
    # the server is away: wait briefly for a connection and bound every statement.
    db = Database(read_database_url_for(ctx), max_size=2, name="jobfence-exporter", timeout=3.0,
                  statement_timeout=5.0)
    registry, collector = registry_for(db, window=window,
                                       burn_windows=(*DEFAULT_BURN_WINDOWS, *burn_windows))
    if once:
        from prometheus_client import generate_latest

        click.echo(generate_latest(registry).decode(), nl=False)
        db.close()
        exit_process(EXIT_UNAVAILABLE if collector.scrape_errors else 0)
    try:
        server = listen(port, host, registry)
    except Fail:
        db.close()
        raise
    stop = threading.Event()

    def on_signal(_signum, _frame):
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    jlog.event(logger, logging.INFO, "exporter_ready", "exporter ready", host=host,
               port=server.server_address[1],
               windows=[window_label(w) for w in collector.windows])
    while not stop.wait(1.0):
        pass
    server.shutdown()
    db.close()
    jlog.event(logger, logging.INFO, "exporter_stopped", "exporter stopped")
    exit_process(0)
