"""The bench's bound beside the peers (docs/performance.md, "What the writes allow"): the
arithmetic of peers.writes_allow, the ladder's scripts, and pgbench_cpu reading PostgreSQL's
CPU from a real pgbench run on the tables the bench builds."""

from __future__ import annotations

import os
import shutil
import sys

import psycopg
import pytest

from conftest import REPO

sys.path.insert(0, str(REPO / "bench"))

from jobfence_bench import ceilings, peers  # noqa: E402
from jobfence_bench.common import Settings, create_plain_table  # noqa: E402


def _round(pg_same: float, pg_row: float, workers: float, relay: float, peer_rate: float,
           error: str | None = None) -> tuple[dict, dict]:
    base = {"cpu_us_per_job": {"postgres": 60.0, "workers": workers, "relay": relay},
            "consumer_cpu_us_per_job": workers + relay,
            "writes_alone": {"same_writes": {"postgres_cpu_us_per_job": pg_same},
                             "job_row": {"postgres_cpu_us_per_job": pg_row}}}
    peer = {"jobs_per_s": peer_rate}
    if error:
        peer = {"error": error}
    return base, peer


def test_writes_allow_is_cores_over_the_writes_and_the_consumers_cpu():
    rounds = [_round(35.0, 29.0, 20.0, 5.0, 25_000.0), _round(40.0, 30.0, 15.0, 5.0, 20_000.0),
              _round(1.0, 1.0, 1.0, 1.0, 1.0, error="the peer failed")]
    allow = peers.writes_allow([b for b, _ in rounds], [p for _, p in rounds], target=1.5)
    cores = os.cpu_count()
    assert allow["cores"] == cores
    # The failed round is left out: two rounds remain.
    most = [cores * 1e6 / (35 + 25), cores * 1e6 / (40 + 20)]
    assert allow["same_writes"]["jobs_per_s"]["runs"] == pytest.approx(most)
    assert allow["same_writes"]["over_peer"]["runs"] == pytest.approx([most[0] / 25_000, most[1] / 20_000])
    assert allow["job_row"]["jobs_per_s"]["runs"] == pytest.approx([cores * 1e6 / 54, cores * 1e6 / 50])
    assert allow["budget_us_per_job"]["runs"] == pytest.approx([cores * 1e6 / 37_500, cores * 1e6 / 30_000])
    assert allow["measured"]["workers"]["runs"] == [20.0, 15.0]


def test_the_ladder_adds_only_the_transition_rows():
    same = ceilings.same_writes_script(100)
    logged = ceilings.transition_rows_script(100)
    # A job done at its first attempt: its row records the submission, the claim and the
    # completion (docs/design.md "What is recorded where").
    assert "plain_event" not in same
    assert logged.count("INSERT INTO plain_event") == 2   # a row per claim and per completion
    # The job row's three statements and the rollup's three upserts stay, in the same order.
    assert [line.split(" ", 3)[:3] for line in logged.splitlines()] == \
        [line.split(" ", 3)[:3] for line in same.splitlines()]
    assert same.count("INSERT INTO plain_metric") == 3


@pytest.mark.skipif(shutil.which("pgbench") is None, reason="pgbench is not installed")
def test_pgbench_cpu_counts_the_backends_that_end_with_the_run(database_url, tmp_path):
    with psycopg.connect(database_url, autocommit=True) as admin:
        create_plain_table(admin)
        try:
            path = tmp_path / "same_writes.sql"
            path.write_text(ceilings.same_writes_script(10))
            settings = Settings(url=database_url, redis_url="", quick=True, seconds=1.0, work=tmp_path)
            r = ceilings.pgbench_cpu(settings, path, 10)
            done = admin.execute("SELECT count(*) FROM public.plain_job WHERE status = 'done'").fetchone()[0]
        finally:
            admin.execute("DROP TABLE IF EXISTS public.plain_job, public.plain_event, public.plain_metric")
    assert done > 0
    assert r["jobs_per_s"] == pytest.approx(r["tps"] * 10)
    # pgbench's two backends were gone when it returned; without the readings taken during
    # the run their CPU would be lost and the figure near zero. A job's writes cost a few
    # µs of CPU at the very least, and not a whole second.
    assert 2 < r["postgres_cpu_us_per_job"] < 1e6
