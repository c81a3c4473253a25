"""The ``jobfence`` command line. See docs/cli.md for every command and exit code."""

from __future__ import annotations

import json
import logging
import os
import random
import shutil
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import click
import psycopg
import redis

from . import __version__
from . import log as jlog
from .errors import (IllegalTransition, InvalidParameter, JobfenceError, JobNotFound,
                     PayloadTooLarge, UnknownKind)
from .transport import MAX_JOB_ID

DEFAULT_DATABASE_URL = "postgresql://127.0.0.1:5432/jobfence"
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"

# Exit codes (documented in docs/cli.md).
EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_NOT_FOUND = 3
EXIT_REFUSED = 4
EXIT_INVALID = 5
EXIT_UNAVAILABLE = 6
EXIT_SQITCH = 7
EXIT_TIMEOUT = 8
EXIT_JOB_FAILED = 9


class Fail(click.ClickException):
    def __init__(self, message: str, code: int):
        super().__init__(message)
        self.exit_code = code


def _cfg(ctx: click.Context) -> dict:
    return ctx.find_root().obj


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, timedelta):
        return value.total_seconds()
    return str(value)


def _json_out(data: Any) -> None:
    click.echo(json.dumps(data, default=_json_default))


def _tag(exc: JobfenceError) -> str:
    return f"{exc} [{exc.sqlstate} {exc.name}]" if exc.sqlstate else str(exc)


def _server_error(exc: psycopg.Error) -> str:
    """A server error's message, HINT and [SQLSTATE name], without the traceback."""
    diag = exc.diag
    text = diag.message_primary or (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    if diag.message_detail:
        text += f" ({diag.message_detail})"
    if diag.message_hint:
        text += f" (HINT: {diag.message_hint})"
    if exc.sqlstate:
        text += f" [{exc.sqlstate} {type(exc).__name__}]"
    return text


def _errors(fn):
    """Map library errors to documented exit codes, one place for every command."""
    import functools

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except JobNotFound as exc:
            raise Fail(f"not found: {_tag(exc)}", EXIT_NOT_FOUND) from None
        except IllegalTransition as exc:
            raise Fail(f"refused: {_tag(exc)}", EXIT_REFUSED) from None
        except (InvalidParameter, PayloadTooLarge, UnknownKind) as exc:
            raise Fail(f"invalid: {_tag(exc)}", EXIT_INVALID) from None
        except JobfenceError as exc:
            raise Fail(_tag(exc), EXIT_ERROR) from None
        except psycopg.OperationalError as exc:
            raise Fail(f"PostgreSQL unavailable: {exc}".strip(), EXIT_UNAVAILABLE) from None
        except psycopg.DataError as exc:
            # SQLSTATE class 22 (data exception): the input cannot be stored or computed,
            # e.g. 22P05 for a \u0000 the server cannot convert, 22008 for a date overflow.
            raise Fail(f"invalid: {_server_error(exc)}", EXIT_INVALID) from None
        except psycopg.Error as exc:
            raise Fail(f"database error: {_server_error(exc)}", EXIT_ERROR) from None
        except redis.ConnectionError as exc:
            raise Fail(f"Redis unavailable: {exc}", EXIT_UNAVAILABLE) from None
    return wrapper


class JobId(click.ParamType):
    """A job id: a positive 64-bit integer (PostgreSQL bigint identity)."""

    name = "ID"
    MAX = MAX_JOB_ID

    def convert(self, value, param, ctx):
        if isinstance(value, int) and not isinstance(value, bool):
            number = value
        else:
            text = str(value).strip()
            if text.startswith("--"):
                self.fail(f"no such option: {text}", param, ctx)
            try:
                number = int(text, 10)
            except ValueError:
                self.fail(f"{text!r} is not a job id: ids are positive 64-bit integers "
                          f"(1..{self.MAX})", param, ctx)
        if not 1 <= number <= self.MAX:
            self.fail(f"{value} is not a job id: ids are positive 64-bit integers "
                      f"(1..{self.MAX})", param, ctx)
        return number


JOB_ID = JobId()
# "-1" must reach JobId (and be refused as an id) rather than be parsed as an option.
ID_COMMAND = {"ignore_unknown_options": True}


class Seconds(click.ParamType):
    """A finite number of seconds (nan, inf and negative durations are refused)."""

    name = "SECONDS"

    def __init__(self, positive: bool = False):
        self.positive = positive

    def convert(self, value, param, ctx):
        try:
            number = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number of seconds", param, ctx)
        if number != number or number < 0 or number > 10 * 365 * 86400 \
                or (self.positive and number == 0):
            self.fail(f"{value!r} must be a finite number of seconds, "
                      f"{'above' if self.positive else 'at least'} 0 and at most 10 years",
                      param, ctx)
        return number


SECONDS = Seconds()
POSITIVE_SECONDS = Seconds(positive=True)


def _client(ctx: click.Context):
    from .client import Client

    cfg = _cfg(ctx)
    # A one-shot command should say "unavailable" quickly rather than wait out a pool.
    return Client(cfg["database_url"], cfg["redis_url"], timeout=3.0)


def _queues_from(app_ref: str | None, queues: tuple[str, ...]) -> list[str]:
    found = list(queues)
    if app_ref:
        from .app import load_app

        found += load_app(app_ref).queues
    return sorted(set(found))


def _exit_process(code: int) -> None:
    # Handler threads that ignored cancellation must not hold the exit hostage: the jobs
    # they held are handed back (or reaped) already.
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


json_option = click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option("--database-url", envvar="JOBFENCE_DATABASE_URL", default=DEFAULT_DATABASE_URL,
              show_default=True, help="PostgreSQL URL [env JOBFENCE_DATABASE_URL].")
@click.option("--redis-url", envvar="JOBFENCE_REDIS_URL", default=DEFAULT_REDIS_URL,
              show_default=True, help="Redis URL [env JOBFENCE_REDIS_URL].")
@click.option("--log-format", type=click.Choice(["text", "json"]), envvar="JOBFENCE_LOG_FORMAT",
              default="text", show_default=True, help="Log lines on stderr [env JOBFENCE_LOG_FORMAT].")
@click.option("--log-level", type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"],
              case_sensitive=False), envvar="JOBFENCE_LOG_LEVEL", default="INFO", show_default=True,
              help="Lowest level logged on stderr [env JOBFENCE_LOG_LEVEL].")
@click.version_option(__version__, prog_name="jobfence")
@click.pass_context
def main(ctx: click.Context, database_url: str, redis_url: str, log_format: str, log_level: str):
    """jobfence: async jobs whose truth lives in PostgreSQL; Redis carries wake-up signals."""
    ctx.obj = {"database_url": database_url, "redis_url": redis_url,
               "log_format": log_format, "log_level": log_level.upper()}


def _setup_logging(ctx: click.Context, role: str, **static) -> None:
    cfg = _cfg(ctx)
    jlog.setup(cfg["log_format"], cfg["log_level"], role=role, **static)


# -- processes ----------------------------------------------------------------------------
@main.command()
@click.option("--app", "app_ref", required=True, help="The App to serve, as MODULE:ATTR.")
@click.option("--concurrency", default=32, show_default=True, type=click.IntRange(1, 4096),
              help="Handlers in flight: sync handlers on this many threads, async handlers "
                   "this many at a time on the event loop.")
@click.option("--batch", type=click.IntRange(1, 10000), default=100, show_default=True,
              help="Ids popped and claimed per round trip; also the outcomes reported per "
                   "round trip.")
@click.option("--prefetch", type=click.IntRange(0, 100000), default=None,
              help="Jobs that may be claimed beyond the handler slots, waiting (heartbeated) "
                   "for a handler [default: --batch].")
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
@click.pass_context
def worker(ctx, app_ref, concurrency, batch, prefetch, processes, queues, name, grace,
           pop_timeout, no_declare):
    """Run handlers: pop ids, claim, run, complete or fail — in batches."""
    from .app import load_app
    from .worker import Worker, default_name

    name = name or default_name()
    _setup_logging(ctx, "worker", worker=name)
    app = load_app(app_ref)
    cfg = _cfg(ctx)
    w = Worker(app, cfg["database_url"], cfg["redis_url"], name=name, concurrency=concurrency,
               batch=batch, prefetch=prefetch, processes=processes,
               queues=list(queues) or None, grace=grace, pop_timeout=pop_timeout,
               declare=not no_declare)
    w.install_signal_handlers()
    _exit_process(w.run())


def _serve(component) -> None:
    import signal

    def on_signal(_signum, _frame):
        component.stop()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    _exit_process(component.run())


@main.command()
@click.option("--interval", default=5.0, show_default=True, type=POSITIVE_SECONDS, help="Seconds between ticks.")
@click.option("--stale-after", default=5.0, show_default=True, type=SECONDS,
              help="Re-push claimable jobs untouched this long when their ready list is empty.")
@click.option("--queue", "queues", multiple=True, help="Queue to watch (repeatable).")
@click.option("--app", "app_ref", default=None, help="Also watch the queues of this App.")
@click.option("--batch", default=1000, show_default=True, type=click.IntRange(1, 100000))
@click.pass_context
def reaper(ctx, interval, stale_after, queues, app_ref, batch):
    """Reap expired leases, recover enqueue_failed, move due retries, re-push lost signals."""
    from .reaper import Reaper

    _setup_logging(ctx, "reaper")
    cfg = _cfg(ctx)
    _serve(Reaper(cfg["database_url"], cfg["redis_url"], interval=interval,
                  stale_after=stale_after, queues=_queues_from(app_ref, queues), batch=batch))


@main.command()
@click.option("--poll-interval", default=5.0, show_default=True, type=POSITIVE_SECONDS,
              help="Seconds between polls while the LISTEN connection is down.")
@click.option("--stale-after", default=5.0, show_default=True, type=SECONDS)
@click.option("--queue", "queues", multiple=True, help="Queue to poll (repeatable).")
@click.option("--app", "app_ref", default=None, help="Also poll the queues of this App.")
@click.pass_context
def relay(ctx, poll_interval, stale_after, queues, app_ref):
    """Push the ids that SQL producers announce on jobs_submitted."""
    from .relay import Relay

    _setup_logging(ctx, "relay")
    cfg = _cfg(ctx)
    _serve(Relay(cfg["database_url"], cfg["redis_url"], poll_interval=poll_interval,
                 stale_after=stale_after, queues=_queues_from(app_ref, queues)))


@main.command()
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
@click.pass_context
def run(ctx, app_ref, workers, concurrency, batch, reaper_interval, stale_after, grace, queues):
    """Relay + reaper + N workers in one process tree (for a laptop)."""
    from .runner import Supervisor, build_children

    _setup_logging(ctx, "run")
    cfg = _cfg(ctx)
    env = dict(os.environ, JOBFENCE_DATABASE_URL=cfg["database_url"],
               JOBFENCE_REDIS_URL=cfg["redis_url"])
    children = build_children(app=app_ref, workers=workers, concurrency=concurrency, batch=batch,
                              log_format=cfg["log_format"], log_level=cfg["log_level"],
                              reaper_interval=reaper_interval, stale_after=stale_after,
                              grace=grace, queues=list(queues))
    sys.exit(Supervisor(children, env=env, grace=grace).run())


# -- producing and operating --------------------------------------------------------------
def _parse_payload(raw: str | None) -> Any:
    if raw is None:
        return {}
    try:
        value = json.loads(raw)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise click.BadParameter(f"not JSON: {exc}", param_hint="--payload") from None
    if value is None:
        # The library reads payload=None as "no payload" ({}); a JSON null typed on the
        # command line is a mistake, refused like the server refuses it.
        raise Fail("invalid: --payload null is not a JSON object; omit --payload (or pass "
                   "'{}') for no payload", EXIT_INVALID)
    if _has_nul(value):
        raise click.BadParameter("JSON text may not contain \\u0000 (PostgreSQL jsonb cannot "
                                 "store it)", param_hint="--payload")
    return value


def _has_nul(value: Any) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if "\x00" in item:
                return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def _parse_when(raw: str | None) -> datetime | None:
    if raw is None:
        return None
    hint = "--run-after"
    try:
        seconds = float(raw)
    except ValueError:
        seconds = None
    if seconds is not None:
        try:
            return datetime.now(timezone.utc) + timedelta(seconds=seconds)
        except (OverflowError, ValueError):
            raise click.BadParameter(f"{raw} seconds from now is not a representable time "
                                     "(years 1 to 9999)", param_hint=hint) from None
    try:
        when = datetime.fromisoformat(raw)
    except ValueError:
        raise click.BadParameter("seconds from now or an ISO 8601 timestamp",
                                 param_hint=hint) from None
    return when if when.tzinfo else when.replace(tzinfo=timezone.utc)


def _job_dict(job) -> dict:
    return job.to_dict()


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, datetime):
        return value.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"
    if isinstance(value, (dict, list)):
        return json.dumps(value)
    return str(value)


def _table(headers: list[str], rows: list[list[Any]]) -> str:
    cells = [[_fmt(c) for c in r] for r in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    line = lambda r: "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip()  # noqa: E731
    return "\n".join([line(headers), line(["-" * w for w in widths])] + [line(r) for r in cells])


@main.command()
@click.argument("kind")
@click.option("--payload", default=None, help="JSON object [default: {}].")
@click.option("--idempotency-key", default=None)
@click.option("--run-after", default=None, help="Seconds from now, or an ISO 8601 timestamp.")
@click.option("--ordering-key", default=None)
@click.option("--count", default=1, show_default=True, type=click.IntRange(1, 1_000_000),
              help="Submit this many copies (one submit_many per 1000).")
@click.option("--wait", is_flag=True, help="Wait until the job(s) are terminal.")
@click.option("--timeout", default=60.0, show_default=True, type=SECONDS, help="For --wait.")
@json_option
@click.pass_context
@_errors
def submit(ctx, kind, payload, idempotency_key, run_after, ordering_key, count, wait, timeout,
           as_json):
    """Submit a job of KIND (commit, then push its id)."""
    payload = _parse_payload(payload)
    when = _parse_when(run_after)
    with _client(ctx) as client:
        if count == 1:
            ids = [client.submit(kind, payload, idempotency_key=idempotency_key, run_after=when,
                                 ordering_key=ordering_key)]
        else:
            if idempotency_key:
                raise click.BadParameter("cannot be combined with --count",
                                         param_hint="--idempotency-key")
            ids = []
            for start in range(0, count, 1000):
                n = min(1000, count - start)
                ids += client.submit_many([{"kind": kind, "payload": payload, "run_after": when,
                                            "ordering_key": ordering_key}] * n)
        if not wait:
            if as_json:
                _json_out({"ids": ids} if count > 1 else {"id": ids[0]})
            else:
                click.echo(f"submitted {kind} job {ids[0]}" if count == 1 else
                           f"submitted {count} {kind} jobs, ids {ids[0]}..{ids[-1]}")
            return
        counts = _progress(client, ids, timeout, quiet=as_json)
        job = client.get(ids[0]) if count == 1 else None
        if as_json:
            _json_out(_job_dict(job) if job else {"ids": ids, "counts": counts})
        elif job:
            click.echo(f"job {job.id}: {job.status}"
                       + (f" result={json.dumps(job.result)}" if job.status == "done" else "")
                       + (f" error={job.error}" if job.error else ""))
        if sum(counts.get(s, 0) for s in ("done", "failed")) < len(ids):
            raise Fail(f"timed out after {timeout}s: {counts}", EXIT_TIMEOUT) from None
        if counts.get("failed"):
            sys.exit(EXIT_JOB_FAILED)


def _progress(client, ids: list[int], timeout: float, *, quiet: bool = False,
              interval: float = 0.5) -> dict[str, int]:
    """Poll status counts until every job is terminal or the timeout passes; draws a
    progress line on stderr (a terminal rewrites it in place)."""
    started = time.monotonic()
    deadline = started + timeout
    tty = sys.stderr.isatty()
    total = len(ids)
    counts: dict[str, int] = {}
    last_line = 0.0
    while True:
        counts = {}
        for start in range(0, total, 10000):
            for status, n in client.status_counts(ids[start:start + 10000]).items():
                counts[status] = counts.get(status, 0) + n
        finished = counts.get("done", 0) + counts.get("failed", 0)
        now = time.monotonic()
        if not quiet and (tty or now - last_line >= 2.0 or finished == total):
            elapsed = now - started
            width = 30
            filled = int(width * finished / total) if total else width
            bar = "#" * filled + "." * (width - filled)
            rate = finished / elapsed if elapsed > 0 else 0.0
            detail = " ".join(f"{s}={counts[s]}" for s in
                              ("queued", "processing", "enqueue_failed", "done", "failed")
                              if counts.get(s))
            text = (f"[{bar}] {finished}/{total} terminal  {detail}  "
                    f"{elapsed:5.1f}s  {rate:,.0f} jobs/s")
            click.echo(("\r" + text + "\x1b[K") if tty else text, err=True, nl=not tty)
            last_line = now
        if finished >= total or now >= deadline:
            if tty and not quiet:
                click.echo("", err=True)
            return counts
        time.sleep(interval)


@main.command(context_settings=ID_COMMAND)
@click.argument("job_id", type=JOB_ID)
@click.option("--events/--no-events", default=True, show_default=True, help="Show its history.")
@json_option
@click.pass_context
@_errors
def status(ctx, job_id, events, as_json):
    """Show a job (and its event history)."""
    with _client(ctx) as client:
        job = client.get(job_id)
        history = client.events(job_id) if events else []
    if as_json:
        out = _job_dict(job)
        if events:
            out["events"] = [{k: getattr(e, k) for k in ("at", "from_status", "to_status",
                                                         "lease_version", "worker", "reason",
                                                         "error")} for e in history]
        _json_out(out)
        return
    fields = ["id", "kind", "queue", "status", "attempts", "lease_version", "owned_by", "payload",
              "result", "error", "created_at", "claimed_at", "finished_at", "run_after",
              "idempotency_key", "ordering_key", "parent_id", "pending_children"]
    data = _job_dict(job)
    # retry_count counts failed attempts (replay resets it); the running or successful
    # attempt counts too. The old "retries 4 of 3" read as a contradiction.
    attempts = job.retry_count + (1 if job.status in ("processing", "done") else 0)
    data["attempts"] = (f"{attempts} ({job.retry_count} failed, max retries {job.max_retries}, "
                        f"so at most {job.max_retries + 1})")
    width = max(len(f) for f in fields)
    for f in fields:
        if f in data and (data[f] is not None or f in ("result", "error")):
            click.echo(f"{f.ljust(width)}  {_fmt(data[f])}")
    if events:
        click.echo("")
        click.echo(_table(["at", "from", "to", "lease", "worker", "reason", "error"],
                          [[e.at, e.from_status, e.to_status, e.lease_version, e.worker,
                            e.reason, e.error] for e in history]))


@main.command(context_settings=ID_COMMAND)
@click.argument("job_id", type=JOB_ID)
@click.option("--reason", default="cancelled", show_default=True)
@json_option
@click.pass_context
@_errors
def cancel(ctx, job_id, reason, as_json):
    """Cancel a job: queued -> failed at once; a running one is asked to stop."""
    with _client(ctx) as client:
        outcome = client.cancel(job_id, reason)
    if as_json:
        _json_out({"job_id": outcome.job_id, "accepted": outcome.accepted,
                   "status": outcome.status})
    elif outcome.accepted:
        click.echo(f"job {job_id}: cancel accepted, status {outcome.status}"
                   + (" (the worker is asked to stop)" if outcome.status == "processing" else ""))
    else:
        click.echo(f"job {job_id}: already {outcome.status}; nothing to cancel", err=True)
    if not outcome.accepted:
        sys.exit(EXIT_REFUSED)


@main.command(context_settings=ID_COMMAND)
@click.argument("job_id", type=JOB_ID)
@json_option
@click.pass_context
@_errors
def replay(ctx, job_id, as_json):
    """Re-drive a failed job (dead-letter replay); a done job is left alone."""
    with _client(ctx) as client:
        replayed = client.replay(job_id)
    if as_json:
        _json_out({"job_id": job_id, "replayed": replayed})
    elif replayed:
        click.echo(f"job {job_id}: replayed, queued again")
    else:
        click.echo(f"job {job_id}: already done; replay is a no-op", err=True)
    if not replayed:
        sys.exit(EXIT_REFUSED)


@main.command()
@click.option("--jobs", "total", default=3000, show_default=True, type=click.IntRange(1, 1_000_000))
@click.option("--crash", default=1, show_default=True, type=click.IntRange(0, 100),
              help="Jobs of kind crash (each kills its worker once; run restarts it).")
@click.option("--timeout", default=300.0, show_default=True, type=SECONDS)
@click.option("--seed", default=None, type=int)
@json_option
@click.pass_context
@_errors
def demo(ctx, total, crash, timeout, seed, as_json):
    """Submit a mix of example jobs, show progress until all are terminal, summarise."""
    rng = random.Random(seed)
    specs: list[dict] = []
    for n in range(total - crash):
        roll = rng.random()
        if roll < 0.55:
            specs.append({"kind": "noop", "payload": {"n": n}})
        elif roll < 0.75:
            specs.append({"kind": "sleep", "payload": {"seconds": round(rng.uniform(0.01, 0.2), 3)}})
        elif roll < 0.90:
            specs.append({"kind": "flaky", "payload": {"p": 0.3}})
        else:
            specs.append({"kind": "transfer", "payload": {"amount": rng.randint(1, 100)}})
    specs += [{"kind": "crash", "payload": {"attempts": 1}}] * crash
    rng.shuffle(specs)
    started = time.monotonic()
    with _client(ctx) as client:
        ids: list[int] = []
        for start in range(0, len(specs), 1000):
            ids += client.submit_many(specs[start:start + 1000])
        if not as_json:
            click.echo(f"submitted {len(ids)} jobs in {time.monotonic() - started:.1f}s "
                       f"(ids {ids[0]}..{ids[-1]})", err=True)
        counts = _progress(client, ids, timeout, quiet=as_json)
        elapsed = time.monotonic() - started
        latencies = sorted(client.db.latencies(ids))
    pct = lambda q: round(latencies[min(len(latencies) - 1, int(q * len(latencies)))], 2) \
        if latencies else None  # noqa: E731
    slo = sum(1 for s in latencies if s <= 25.0) / len(ids)
    summary = {"jobs": len(ids), "seconds": round(elapsed, 1),
               "jobs_per_second": round(len(ids) / elapsed, 1) if elapsed else None,
               "counts": counts,
               "latency_seconds": {"p50": pct(0.50), "p95": pct(0.95), "p99": pct(0.99),
                                   "max": round(latencies[-1], 2) if latencies else None},
               "within_25s": round(slo, 4)}
    if as_json:
        _json_out(summary)
    else:
        click.echo(_table(["status", "jobs"], [[s, n] for s, n in sorted(counts.items())]))
        lat = summary["latency_seconds"]
        click.echo(f"{len(ids)} jobs in {elapsed:.1f}s ({summary['jobs_per_second']} jobs/s)")
        click.echo(f"submit -> terminal: p50 {lat['p50']}s  p95 {lat['p95']}s  p99 {lat['p99']}s  "
                   f"max {lat['max']}s; {slo:.1%} within the 25 s SLO (target 95 %)")
        if counts.get("failed"):
            click.echo(f"{counts['failed']} failed: flaky jobs (p=0.3) that spent their retries; "
                       "see `jobfence status ID`, re-drive with `jobfence replay ID`")
    if sum(counts.get(s, 0) for s in ("done", "failed")) < len(ids):
        raise Fail(f"timed out after {timeout}s", EXIT_TIMEOUT)


# -- schema -------------------------------------------------------------------------------
def _repo_root() -> Path | None:
    for base in (Path.cwd(), Path(__file__).resolve().parents[2]):
        if (base / "sqitch.plan").exists():
            return base
    return None


@main.group()
def db():
    """Deploy, verify or revert the SQL schema (wraps sqitch)."""


def _sqitch(ctx: click.Context, action: list[str], as_json: bool) -> None:
    exe = shutil.which("sqitch")
    if exe is None:
        raise Fail("sqitch is not installed or not on PATH: install it (Debian: apt-get install "
                   "sqitch libdbd-pg-perl, or run scripts/setup) and retry", EXIT_SQITCH)
    root = _repo_root()
    if root is None:
        raise Fail("no sqitch.plan here: run from the jobfence repository root", EXIT_SQITCH)
    url = _cfg(ctx)["database_url"]
    target = "db:" + (url if "://" in url else f"pg://{url}")
    if target.startswith("db:postgresql://"):
        target = "db:pg://" + target[len("db:postgresql://"):]
    proc = subprocess.run([exe] + action + [target], cwd=root, capture_output=True, text=True)
    if as_json:
        _json_out({"action": action[0], "ok": proc.returncode == 0, "exit": proc.returncode,
                   "output": (proc.stdout + proc.stderr).strip()})
    else:
        sys.stdout.write(proc.stdout)
        sys.stderr.write(proc.stderr)
    if proc.returncode != 0:
        raise Fail(f"sqitch {action[0]} failed with exit {proc.returncode}", EXIT_SQITCH)


@db.command("deploy")
@json_option
@click.pass_context
def db_deploy(ctx, as_json):
    """sqitch deploy --verify to --database-url."""
    _sqitch(ctx, ["deploy", "--verify"], as_json)


@db.command("verify")
@json_option
@click.pass_context
def db_verify(ctx, as_json):
    """sqitch verify against --database-url."""
    _sqitch(ctx, ["verify"], as_json)


@db.command("revert")
@click.option("--yes", is_flag=True, help="Do not ask (required without a terminal).")
@json_option
@click.pass_context
def db_revert(ctx, yes, as_json):
    """sqitch revert (drops the jobs schema and every job in it)."""
    if not yes and not click.confirm("Revert drops every job. Continue?", default=False):
        raise Fail("aborted", EXIT_ERROR)
    _sqitch(ctx, ["revert", "-y"], as_json)


if __name__ == "__main__":  # pragma: no cover
    main()
