"""Driving the web dashboard (`/ui` of `jobfence api`) in Debian's Chromium through
Playwright: the browser is the system one, never a downloaded build."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import psycopg
import pytest

from conftest import REPO

CHROMIUM = os.environ.get("JOBFENCE_TEST_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync"]
# Screenshots of every page a test visits (gitignored); docs/img holds the chosen ones.
ARTIFACTS = REPO / "py" / "tests" / "artifacts" / "ui"


def launch(playwright):
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: scripts/setup --test installs Debian's chromium")
    return playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS,
                                      headless=True)


def shoot(page, name: str, *, full_page: bool = True) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    target = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(target), full_page=full_page)
    return target


def keep_for_docs(shot: Path, name: str) -> None:
    """Copy a screenshot to docs/img when JOBFENCE_UI_DOC_SHOTS is set (how the README's
    pictures are refreshed: `JOBFENCE_UI_DOC_SHOTS=1 pytest py/tests/test_ui.py`)."""
    if os.environ.get("JOBFENCE_UI_DOC_SHOTS"):
        shutil.copyfile(shot, REPO / "docs" / "img" / f"{name}.png")


def sql_one(url: str, query: str, params=None):
    with psycopg.connect(url, autocommit=True) as c:
        return c.execute(query, params).fetchone()


def sql_all(url: str, query: str, params=None):
    with psycopg.connect(url, autocommit=True) as c:
        return c.execute(query, params).fetchall()


def status_of(url: str, job_id: int) -> str:
    return sql_one(url, "SELECT status::text FROM jobs.job WHERE id = %s", (job_id,))[0]


def pushed_ids(redis_url: str, queue: str = "default") -> list[int]:
    """The ids waiting in a queue's Redis ready list."""
    import redis as redis_lib

    from jobfence.transport import ready_key

    r = redis_lib.Redis.from_url(redis_url)
    try:
        return [int(x) for x in r.lrange(ready_key(queue), 0, -1)]
    finally:
        r.close()


AUTO_EXPLAIN = ("LOAD 'auto_explain'", "SET auto_explain.log_min_duration = 0",
                "SET auto_explain.log_analyze = on", "SET auto_explain.log_buffers = on",
                "SET auto_explain.log_format = json", "SET client_min_messages = log")


def blocks_read(url: str, query, params=None) -> int:
    """Shared buffers (hit or read) one statement touched, functions' inner statements
    included: auto_explain's plan of it, sent back to this session as a LOG notice. A count
    of pages, not a time, so it says the same on a busy machine."""
    import json

    logged: list[str] = []
    with psycopg.connect(url, autocommit=True) as c:
        # Once before counting: a new session's first call loads catalogs and compiles the
        # functions, some hundreds of pages that have nothing to do with the table's size.
        c.execute(query, params).fetchall()
        c.add_notice_handler(lambda d: logged.append(d.message_primary or ""))
        for setting in AUTO_EXPLAIN:
            c.execute(setting)
        c.execute(query, params).fetchall()
    (plan,) = [json.loads(m.split("plan:", 1)[1]) for m in logged if "plan:" in m]
    top = plan["Plan"]
    return int(top.get("Shared Hit Blocks", 0)) + int(top.get("Shared Read Blocks", 0))
