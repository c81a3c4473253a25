"""``jobfence chaos``: the chaos runner (docs/cli.md, docs/reliability.md "Chaos runs")."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import click

from jobfence.cli.common import EXIT_UNAVAILABLE, EXIT_USAGE, Fail, cfg, json_default, setup_logging


def _say(message: str) -> None:
    click.echo(f"{time.strftime('%H:%M:%S')} chaos: {message}", err=True)


@click.command()
@click.option("--quick", "profile", flag_value="quick", help="Under 3 minutes: every fault "
              "kind once, a few thousand jobs [the default].")
@click.option("--long", "profile", flag_value="long", help="Several minutes, tens of thousands "
              "of jobs, every fault kind four times; the report goes to "
              "bench/results/chaos-TIMESTAMP.json unless --report says otherwise.")
@click.option("--seed", type=click.IntRange(0, 2**31 - 1), default=None,
              help="Seed of the workload and the fault schedule [default: random, printed].")
@click.option("--admin-url", default=None,
              help="A database URL on the server to use (the run creates and drops its own "
                   "database there) [default: --database-url with database postgres].")
@click.option("--no-postgres-restart", is_flag=True,
              help="Do not restart PostgreSQL (pg_ctlcluster) during the run.")
@click.option("--failover", is_flag=True,
              help="Run on a failover formation of its own (pg_auto_failover: monitor, primary, "
                   "synchronous standby; Redis Sentinel: master, replica, 3 sentinels), through "
                   "one multi-host URL and one redis+sentinel URL, and add the faults "
                   "pg_failover, pg_switchover and redis_failover (docs/operations.md, "
                   "\"Failover\").")
@click.option("--failovers-only", is_flag=True,
              help="With --failover: only the three failovers and a worker kill (a short proof).")
@click.option("--keep", is_flag=True, help="Keep the run's database and logs.")
@click.option("--report", "report_path", type=click.Path(dir_okay=False), default=None,
              help="Also write the JSON report to this file.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as one JSON object.")
@click.pass_context
def chaos(ctx, profile, seed, admin_url, no_postgres_restart, failover, failovers_only, keep,
          report_path, as_json):
    """Mixed workload through the real processes while faults are injected; exit 1 unless no
    job was lost or applied twice, fan-in and ordering held and jobs.audit is clean."""
    from .run import PROFILES, ChaosRun, Interrupted
    from .servers import SetupError, repo_root, with_database
    from . import report

    import logging

    profile = profile or "quick"
    setup_logging(ctx, "chaos")
    # The run's own producers park jobs and retry on purpose while faults are on; their
    # warnings would drown the progress lines (the report counts what they did).
    for name in ("jobfence.client", "jobfence.chaos", "psycopg.pool"):
        logging.getLogger(name).setLevel(logging.ERROR)
    seed = seed if seed is not None else int.from_bytes(os.urandom(3), "big")
    url = admin_url or with_database(cfg(ctx)["database_url"], "postgres")
    if not url.startswith(("postgresql://", "postgres://")):
        raise Fail(f"--admin-url must be a postgresql:// URL, got {url!r}", EXIT_USAGE)
    if report_path is None and profile == "long":
        root = repo_root() or Path.cwd()
        report_path = str(root / "bench" / "results"
                          / f"chaos-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}.json")
    if failovers_only and not failover:
        raise Fail("--failovers-only needs --failover", EXIT_USAGE)
    runner = ChaosRun(PROFILES[profile], admin_url=url, seed=seed,
                      postgres_restart=not no_postgres_restart, keep=keep, say=_say,
                      failover=failover, only_failovers=failovers_only)
    try:
        result = runner.run()
    except Interrupted as exc:
        raise Fail(f"chaos run {exc}; cleaned up (logs in {runner.workdir})", 1) from None
    except SetupError as exc:
        raise Fail(f"chaos: {exc}", EXIT_UNAVAILABLE) from None
    except Exception as exc:  # noqa: BLE001 - a crashed run is a failed verdict, said in one line
        raise Fail(f"chaos run aborted: {type(exc).__name__}: {exc} (logs in {runner.workdir})",
                   1) from None
    text = json.dumps(result, default=json_default)
    if report_path:
        Path(report_path).parent.mkdir(parents=True, exist_ok=True)
        Path(report_path).write_text(text + "\n")
        _say(f"report written to {report_path}")
    click.echo(text if as_json else report.render(result))
    if not result["ok"]:
        _say("FAILED: " + "; ".join(result["reasons"]))
        sys.exit(1)
