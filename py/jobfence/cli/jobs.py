"""Producing and operating on jobs: submit, status, cancel, replay, demo."""

from __future__ import annotations

import json
import random
import sys
import time
from datetime import datetime, timedelta, timezone
from typing import Any

import click
import psycopg

from .common import (EXIT_INVALID, EXIT_JOB_FAILED, EXIT_REFUSED, EXIT_TIMEOUT, EXIT_USAGE,
                     ID_COMMAND, JOB_ID, SECONDS, Fail, client_for, fmt, job_dict, json_option,
                     json_out, map_errors, table, utf8_text)
from .listing import attempts


# Far above any sensible kind's max_payload_bytes (256 KiB by default): the CLI refuses to
# ship more rather than have PostgreSQL allocate hundreds of MB to say JB004.
MAX_PAYLOAD_TEXT = 16 * 1024 * 1024


def _read_payload_text(raw: str) -> str:
    """``--payload`` is the JSON itself, ``@PATH`` a file holding it, or ``-`` standard
    input: a payload near the 256 KiB limit does not fit in a command line."""
    if raw == "-":
        text = click.get_text_stream("stdin").read(MAX_PAYLOAD_TEXT + 1)
    elif raw.startswith("@"):
        path = raw[1:]
        try:
            with open(path, encoding="utf-8") as fh:
                text = fh.read(MAX_PAYLOAD_TEXT + 1)
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise click.BadParameter(f"cannot read {path}: {reason}", param_hint="--payload") from None
    else:
        text = raw
    if len(text) > MAX_PAYLOAD_TEXT:
        raise Fail(f"invalid: the payload is over {MAX_PAYLOAD_TEXT // (1024 * 1024)} MiB, more than "
                   "the CLI sends; a kind accepts at most its max_payload_bytes (256 KiB by default, "
                   "JB004)", EXIT_INVALID)
    return text


def _no_constant(name: str):
    raise click.BadParameter(f"not JSON: {name} is not a JSON number", param_hint="--payload")


# The largest IEEE-754 double: the server refuses numbers beyond it (22003), as no JSON
# reader decodes them portably; the CLI says so before sending.
LARGEST_DOUBLE = int(sys.float_info.max)


def _out_of_range(text: str) -> Fail:
    shown = text if len(text) <= 40 else f"{text[:20]}...({len(text)} characters)"
    return Fail(f"invalid --payload: the number {shown} is beyond the IEEE-754 double range "
                "(greater than 1.7976931348623157e308 in magnitude), which JSON readers "
                "cannot decode; send it as a string", EXIT_USAGE)


def _finite(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise _out_of_range(text)
    return value


def _in_range(text: str) -> int:
    # Compared as text first: Python refuses to convert integers over 4300 digits.
    digits = text.lstrip("-")
    if len(digits) > len(str(LARGEST_DOUBLE)) or abs(int(text)) > LARGEST_DOUBLE:
        raise _out_of_range(text)
    return int(text)


def _parse_payload(raw: str | None) -> Any:
    if raw is None:
        return {}
    text = _read_payload_text(raw)
    try:
        value = json.loads(text, parse_constant=_no_constant, parse_float=_finite,
                           parse_int=_in_range)
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
        if not seconds >= 0 or seconds == float("inf"):
            # As every duration option: "5 seconds ago" is a typo more often than "now".
            raise click.BadParameter(f"{raw}: seconds from now must be 0 or more (finite); "
                                     "omit --run-after to run now", param_hint=hint)
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
    from ..db import RUN_AFTER_HINT, unreadable_offset

    # Python reads offsets PostgreSQL does not: refused here, for --count 1 and a batch alike.
    problem = unreadable_offset(when)
    if problem:
        raise click.BadParameter(f"{raw}: not a timestamp PostgreSQL can read: {problem} "
                                 f"(HINT: {RUN_AFTER_HINT})", param_hint=hint)
    return when if when.tzinfo else when.replace(tzinfo=timezone.utc)



@click.command()
@click.argument("kind")
@click.option("--payload", default=None,
              help="JSON object [default: {}]; @PATH reads it from a file, - from stdin.")
@click.option("--idempotency-key", default=None)
@click.option("--run-after", default=None, help="Seconds from now, or an ISO 8601 timestamp.")
@click.option("--ordering-key", default=None)
@click.option("--priority", default=None, type=click.IntRange(0, 9),
              help="0 (runs first) to 9 [default: the kind's].")
@click.option("--count", default=1, show_default=True, type=click.IntRange(1, 1_000_000),
              help="Submit this many copies (one submit_many per 1000).")
@click.option("--wait", is_flag=True, help="Wait until the job(s) are terminal.")
@click.option("--timeout", default=60.0, show_default=True, type=SECONDS, help="For --wait.")
@json_option
@click.pass_context
@map_errors
def submit(ctx, kind, payload, idempotency_key, run_after, ordering_key, priority, count, wait,
           timeout, as_json):
    """Submit a job of KIND (commit, then push its id)."""
    kind = utf8_text(kind, "KIND")
    idempotency_key = utf8_text(idempotency_key, "--idempotency-key")
    ordering_key = utf8_text(ordering_key, "--ordering-key")
    payload = _parse_payload(payload)
    when = _parse_when(run_after)
    with client_for(ctx) as client:
        created = True
        if count == 1:
            job_id, created = client.submit_job(kind, payload, idempotency_key=idempotency_key,
                                                run_after=when, ordering_key=ordering_key,
                                                priority=priority)
            ids = [job_id]
        else:
            if idempotency_key:
                raise click.BadParameter("cannot be combined with --count",
                                         param_hint="--idempotency-key")
            ids = []
            for start in range(0, count, 1000):
                n = min(1000, count - start)
                ids += client.submit_many([{"kind": kind, "payload": payload, "run_after": when,
                                            "ordering_key": ordering_key,
                                            "priority": priority}] * n)
        if not wait:
            if as_json:
                json_out({"ids": ids} if count > 1 else {"id": ids[0], "created": created})
            elif not created:
                click.echo(f"existing {kind} job {ids[0]}: idempotency key {idempotency_key!r} "
                           "was used before; nothing new submitted")
            else:
                click.echo(f"submitted {kind} job {ids[0]}" if count == 1 else
                           f"submitted {count} {kind} jobs, ids {ids[0]}..{ids[-1]}")
            return
        counts = _progress(client, ids, timeout, quiet=as_json)
        job = client.get(ids[0]) if count == 1 else None
        if as_json:
            json_out(job_dict(job) if job else {"ids": ids, "counts": counts})
        elif job:
            click.echo(f"job {job.id}: {job.status}"
                       + (f" result={json.dumps(job.result)}" if job.status == "done" else "")
                       + (f" error={job.error}" if job.error else ""))
        if sum(counts.get(s, 0) for s in ("done", "failed")) < len(ids):
            left = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()) if s not in ("done", "failed"))
            raise Fail(f"timed out after {timeout}s with {left or 'none'} not terminal", EXIT_TIMEOUT) from None
        if counts.get("failed"):
            sys.exit(EXIT_JOB_FAILED)


def _progress(client, ids: list[int], timeout: float, *, quiet: bool = False,
              interval: float = 0.5, started: float | None = None) -> dict[str, int]:
    """Poll status counts until every job is terminal or the timeout passes; draws a
    progress line on stderr (a terminal rewrites it in place). Rates count from ``started``
    (the first submission), so a line drawn just after a long submit does not overstate it."""
    polled = time.monotonic()
    started = polled if started is None else started
    deadline = polled + timeout
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


@click.command(context_settings=ID_COMMAND)
@click.argument("job_id", type=JOB_ID)
@click.option("--events/--no-events", default=True, show_default=True, help="Show its history.")
@json_option
@click.pass_context
@map_errors
def status(ctx, job_id, events, as_json):
    """Show a job (and its event history)."""
    unread = None
    with client_for(ctx) as client:
        job = client.get(job_id)
        history = []
        if events:
            try:
                history = client.events(job_id)
            except psycopg.errors.InsufficientPrivilege:
                # A worker's role may read a job but not its history (docs/security.md): the
                # job is still worth showing, and the rest of the answer says what is missing.
                unread = ("this role may not read a job's history (jobs.events); the job is "
                          "shown without it (--no-events asks for no history)")
    if unread:
        click.echo(f"note: {unread}", err=True)
    if as_json:
        out = job_dict(job)
        if events:
            out["events"] = None if unread else [
                {k: getattr(e, k) for k in ("at", "from_status", "to_status", "lease_version",
                                            "worker", "reason", "error")} for e in history]
        json_out(out)
        return
    fields = ["id", "kind", "queue", "status", "attempts", "lease_version", "owned_by", "payload",
              "result", "error", "created_at", "claimed_at", "finished_at", "run_after",
              "idempotency_key", "ordering_key", "parent_id", "pending_children", "progress",
              "progress_at", "snoozes"]
    data = job_dict(job)
    # retry_count counts failed attempts (replay resets it); the running or successful
    # attempt counts too. The old "retries 4 of 3" read as a contradiction.
    data["attempts"] = (f"{attempts(job)} ({job.retry_count} failed, max retries {job.max_retries}, "
                        f"so at most {job.max_retries + 1})")
    if job.status == "done" and job.error:
        # A done job keeps the error of its last failed attempt (docs/decisions.md): say so,
        # or a success reads as a failure.
        data["error"] = f"{job.error}  (an earlier attempt's; the job then succeeded)"
    width = max(len(f) for f in fields)
    for f in fields:
        if f == "snoozes" and not data.get(f):
            continue
        if f in data and (data[f] is not None or f in ("result", "error")):
            click.echo(f"{f.ljust(width)}  {fmt(data[f])}")
    if events and not unread:
        click.echo("")
        click.echo(table(["at", "from", "to", "lease", "worker", "reason", "error"],
                          [[e.at, e.from_status, e.to_status, e.lease_version, e.worker,
                            e.reason, e.error] for e in history]))


@click.command(context_settings=ID_COMMAND)
@click.argument("job_id", type=JOB_ID)
@click.option("--reason", default="cancelled", show_default=True)
@json_option
@click.pass_context
@map_errors
def cancel(ctx, job_id, reason, as_json):
    """Cancel a job: queued -> failed at once; a running one is asked to stop."""
    with client_for(ctx) as client:
        outcome = client.cancel(job_id, reason)
    if as_json:
        json_out({"job_id": outcome.job_id, "accepted": outcome.accepted,
                   "status": outcome.status})
    elif outcome.accepted:
        click.echo(f"job {job_id}: cancel accepted, status {outcome.status}"
                   + (" (the worker is asked to stop)" if outcome.status == "processing" else ""))
    else:
        click.echo(f"job {job_id}: already {outcome.status}; nothing to cancel", err=True)
    if not outcome.accepted:
        sys.exit(EXIT_REFUSED)


@click.command(context_settings=ID_COMMAND)
@click.argument("job_id", type=JOB_ID)
@json_option
@click.pass_context
@map_errors
def replay(ctx, job_id, as_json):
    """Re-drive a failed job (dead-letter replay); a done job is left alone."""
    with client_for(ctx) as client:
        replayed = client.replay(job_id)
    if as_json:
        json_out({"job_id": job_id, "replayed": replayed})
    elif replayed:
        click.echo(f"job {job_id}: replayed, queued again")
    else:
        click.echo(f"job {job_id}: already done; replay is a no-op", err=True)
    if not replayed:
        sys.exit(EXIT_REFUSED)


DEFAULT_SLO_SECONDS = 25.0


def _slo_latencies(client) -> dict[str, float]:
    """kind -> slo_latency seconds, as declared (jobs.job_type)."""
    out = {}
    for kind, row in client.db.types().items():
        value = (row or {}).get("slo_latency")
        if value is not None:
            out[kind] = value.total_seconds() if hasattr(value, "total_seconds") else float(value)
    return out


@click.command()
@click.option("--jobs", "total", default=3000, show_default=True, type=click.IntRange(1, 1_000_000))
@click.option("--crash", default=1, show_default=True, type=click.IntRange(0, 100),
              help="Jobs of kind crash (each kills its worker once; run restarts it).")
@click.option("--timeout", default=300.0, show_default=True, type=SECONDS)
@click.option("--seed", default=None, type=int)
@json_option
@click.pass_context
@map_errors
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
    with client_for(ctx) as client:
        ids: list[int] = []
        for start in range(0, len(specs), 1000):
            ids += client.submit_many(specs[start:start + 1000])
        if not as_json:
            click.echo(f"submitted {len(ids)} jobs in {time.monotonic() - started:.1f}s "
                       f"(ids {ids[0]}..{ids[-1]})", err=True)
        counts = _progress(client, ids, timeout, quiet=as_json, started=started)
        elapsed = time.monotonic() - started
        ended = client.db.latencies(ids)
        objectives = _slo_latencies(client)
    latencies = sorted(seconds for _, seconds in ended)
    # What the objective counts (jobs.metrics): ended jobs, timed from due, each against its
    # kind's slo_latency. A job still running is no miss yet, and no hit.
    met = sum(1 for kind, seconds in ended if seconds <= objectives.get(kind, DEFAULT_SLO_SECONDS))
    slo = met / len(ended) if ended else None
    pct = lambda q: round(latencies[min(len(latencies) - 1, int(q * len(latencies)))], 2) \
        if latencies else None  # noqa: E731
    terminal = sum(counts.get(s, 0) for s in ("done", "failed"))
    finished = terminal == len(ids)
    summary = {"jobs": len(ids), "terminal": terminal, "finished": finished,
               "seconds": round(elapsed, 1),
               # Jobs that ended, over the time since the first submission: an unfinished
               # run does not get credit for the jobs it never finished.
               "jobs_per_second": round(terminal / elapsed, 1) if elapsed else None,
               "counts": counts,
               "latency_seconds": {"p50": pct(0.50), "p95": pct(0.95), "p99": pct(0.99),
                                   "max": round(latencies[-1], 2) if latencies else None},
               "ended": len(ended), "within_slo": None if slo is None else round(slo, 4)}
    if as_json:
        json_out(summary)
    else:
        click.echo(table(["status", "jobs"], [[s, n] for s, n in sorted(counts.items())]))
        lat = summary["latency_seconds"]
        if finished:
            click.echo(f"{len(ids)} jobs in {elapsed:.1f}s ({summary['jobs_per_second']} jobs/s)")
        else:
            click.echo(f"unfinished: {terminal} of {len(ids)} jobs terminal after {elapsed:.1f}s "
                       f"({summary['jobs_per_second']} jobs/s so far)")
        if ended:
            click.echo(f"due -> end: p50 {lat['p50']}s  p95 {lat['p95']}s  p99 {lat['p99']}s  "
                       f"max {lat['max']}s; {slo:.1%} of {len(ended)} ended jobs within their "
                       "kind's slo_latency (25 s unless declared; target 95 %)")
        if counts.get("failed"):
            click.echo(f"{counts['failed']} failed: flaky jobs (p=0.3) that spent their retries; "
                       "see `jobfence status ID`, re-drive with `jobfence replay ID`")
    if not finished:
        raise Fail(f"timed out after {timeout}s", EXIT_TIMEOUT)
