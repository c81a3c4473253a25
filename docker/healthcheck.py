#!/usr/bin/env python3
"""Container health check: GET a URL and, for a Prometheus page, check a few samples.

    jobfence-healthcheck URL [--has NAME] [--equals NAME=VALUE] [--fresh NAME=SECONDS]

Exit 0 when the URL answers 200 and every condition holds, 1 otherwise (one line on stderr
says why). A metrics page that answers proves only that the process's HTTP thread lives;
the conditions read what its main loop last did (the relay's LISTEN connection, the reaper's
last completed tick), which is what an orchestrator should restart it for.
"""

from __future__ import annotations

import argparse
import sys
import time
import urllib.error
import urllib.request


def samples(text: str) -> dict[str, float]:
    """The first sample of each metric name (labels ignored: these processes have one)."""
    from prometheus_client.parser import text_string_to_metric_families

    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.setdefault(sample.name, sample.value)
    return out


def check(argv: list[str] | None = None) -> str | None:
    ap = argparse.ArgumentParser(prog="jobfence-healthcheck")
    ap.add_argument("url")
    ap.add_argument("--has", action="append", default=[], metavar="NAME")
    ap.add_argument("--equals", action="append", default=[], metavar="NAME=VALUE")
    ap.add_argument("--fresh", action="append", default=[], metavar="NAME=SECONDS",
                    help="NAME is a Unix time no older than SECONDS")
    ap.add_argument("--timeout", type=float, default=3.0)
    args = ap.parse_args(argv)
    try:
        with urllib.request.urlopen(args.url, timeout=args.timeout) as resp:
            body = resp.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as exc:
        return f"{args.url}: HTTP {exc.code}"
    except (OSError, ValueError) as exc:
        return f"{args.url}: {exc}"
    if not (args.has or args.equals or args.fresh):
        return None
    try:
        found = samples(body)
    except ValueError as exc:
        return f"{args.url}: not a Prometheus page ({exc})"
    for name in args.has:
        if name not in found:
            return f"{name}: not on the page"
    for cond in args.equals:
        name, want = cond.split("=", 1)
        if found.get(name) != float(want):
            return f"{name} is {found.get(name)}, want {want}"
    for cond in args.fresh:
        name, limit = cond.split("=", 1)
        age = time.time() - found.get(name, 0.0)
        if age > float(limit):
            return f"{name}: {age:.0f} s old, more than {limit} s"
    return None


def main() -> int:
    problem = check()
    if problem:
        print(f"unhealthy: {problem}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
