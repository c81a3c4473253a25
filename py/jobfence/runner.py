"""``jobfence run``: relay + reaper + N workers (+ the HTTP API) as child processes of one
command, for a laptop or a demo. This module says which processes, with which options;
jobfence.supervisor starts them, restarts one that dies (with backoff) and passes
SIGTERM/SIGINT on as one SIGTERM each so the workers drain, then the tree exits 0.
"""

from __future__ import annotations

import sys

from .supervisor import Child


def build_children(*, app: str, workers: int, concurrency: int, batch: int | None,
                   log_format: str, log_level: str, reaper_interval: float, stale_after: float,
                   grace: float, queues: list[str], metrics_port: int | None = None,
                   metrics_host: str = "127.0.0.1", api_port: int | None = None,
                   api_host: str = "127.0.0.1", api_no_auth: bool = False,
                   role_urls: dict[str, str] | None = None, declare: bool = True,
                   api_env: dict[str, str] | None = None) -> list[Child]:
    """``role_urls``: role (worker, reaper, relay, api) -> the database URL its children log
    in with, passed as their JOBFENCE_DATABASE_URL. ``api_env``: more environment for the
    API child alone (its admin login)."""
    urls = role_urls or {}

    def login(role: str) -> dict:
        return {"JOBFENCE_DATABASE_URL": urls[role]} if urls.get(role) else {}

    base = [sys.executable, "-m", "jobfence", "--log-format", log_format, "--log-level", log_level]
    qargs = [a for q in queues for a in ("--queue", q)]

    def metrics(offset: int) -> list[str]:
        # One port per child, in a fixed order, so a scrape config can list them; 0 lets
        # every child pick a free one.
        if metrics_port is None:
            return []
        port = metrics_port + offset if metrics_port else 0
        return ["--metrics-port", str(port), "--metrics-host", metrics_host]

    children = [
        Child("relay", base + ["relay", "--app", app, "--poll-interval", str(reaper_interval),
                               "--stale-after", str(stale_after)] + qargs + metrics(0),
              login("relay")),
        Child("reaper", base + ["reaper", "--app", app, "--interval", str(reaper_interval),
                                "--stale-after", str(stale_after)] + qargs + metrics(1),
              login("reaper")),
    ]
    for n in range(1, workers + 1):
        argv = base + ["worker", "--app", app, "--concurrency", str(concurrency),
                       "--grace", str(grace)] + qargs + metrics(1 + n)
        if batch:
            argv += ["--batch", str(batch)]
        if not declare:
            argv.append("--no-declare")
        children.append(Child(f"worker-{n}", argv, login("worker")))
    if api_port is not None:
        # The API serves its own metrics on its port (GET /metrics), so it takes no
        # --metrics-port.
        api_child_env = {**login("api"), **(api_env or {})}
        children.append(Child("api", base + ["api", "--host", api_host, "--port", str(api_port)]
                              + (["--no-auth"] if api_no_auth else []), api_child_env))
    return children
