"""Retention (docs/cli.md: the reaper's --retain, `jobfence prune`): finished jobs older than
the cutoff go, in bounded slices, and their history with its day partitions; young and
unfinished ones stay."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading

from jobfence.reaper import Reaper

from conftest import REPO, wait_until


def _jobs(conn, n: int, kind: str = "kept") -> list[int]:
    conn.execute("SELECT jobs.define_type(%s)", (kind,))
    ids = [r[0] for r in conn.execute(
        "SELECT id FROM jobs.submit_many((SELECT jsonb_agg(jsonb_build_object('kind', %s::text, 'notify', false))"
        " FROM generate_series(1, %s)))", (kind, n)).fetchall()]
    conn.execute("SELECT count(*) FROM jobs.claim_many(%s, 'w1')", (ids,))
    conn.execute("SELECT count(*) FROM jobs.complete_many(%s, 'w1', %s, NULL)", (ids, [1] * n))
    return ids


def _age(conn, ids: list[int], days: int) -> None:
    """Move the jobs' whole history back by ``days``, as if it had happened then."""
    conn.execute("UPDATE jobs.job SET finished_at = finished_at - make_interval(days => %s) WHERE id = ANY(%s)",
                 (days, ids))
    conn.execute("UPDATE jobs.event SET at = at - make_interval(days => %s) WHERE job_id = ANY(%s)", (days, ids))


def past_partition(conn, days: int) -> str:
    """The day partition of ``days`` ago, as the reaper would have created it then."""
    name, lo, hi = conn.execute(
        "SELECT 'event_' || to_char(d AT TIME ZONE 'UTC', 'YYYYMMDD'), d, d + interval '24 hours'"
        " FROM date_trunc('day', now() - make_interval(days => %s), 'UTC') AS d", (days,)).fetchone()
    conn.execute(f"CREATE TABLE IF NOT EXISTS jobs.{name} PARTITION OF jobs.event FOR VALUES FROM ('{lo.isoformat()}') "
                 f"TO ('{hi.isoformat()}')")
    return f"jobs.{name}"


def _exists(conn, relation: str) -> bool:
    return conn.execute("SELECT to_regclass(%s) IS NOT NULL", (relation,)).fetchone()[0]


def _count(conn, ids: list[int]) -> tuple[int, int]:
    return (conn.execute("SELECT count(*) FROM jobs.job WHERE id = ANY(%s)", (ids,)).fetchone()[0],
            conn.execute("SELECT count(*) FROM jobs.history WHERE job_id = ANY(%s)", (ids,)).fetchone()[0])


def test_the_reaper_prunes_old_finished_jobs_in_slices_and_keeps_the_rest(clean_db, conn, redis_url):
    old, young = _jobs(conn, 25, "old"), _jobs(conn, 5, "young")
    day = past_partition(conn, 10)
    _age(conn, old, 10)
    queued = conn.execute("SELECT (jobs.submit('young')).id").fetchone()[0]
    conn.execute("UPDATE jobs.job SET created_at = now() - interval '30 days' WHERE id = %s", (queued,))
    # Slices of 10 (--batch): the three slices of the backlog run tick after tick, not a
    # minute apart, and none takes more than its slice.
    reaper = Reaper(clean_db, redis_url, interval=600.0, batch=10, retain=7 * 86400.0)
    runner = threading.Thread(target=reaper.run, daemon=True)
    runner.start()
    try:
        wait_until(lambda: _count(conn, old) == (0, 0), 60, interval=0.1,
                   what="the old jobs pruned and their day partition dropped")
    finally:
        reaper.stop()
        runner.join(30)
    assert not _exists(conn, day)
    assert _count(conn, young) == (5, 15)
    assert conn.execute("SELECT status FROM jobs.job WHERE id = %s", (queued,)).fetchone()[0] == "queued"
    assert conn.execute("SELECT sum(violations) FROM jobs.audit()").fetchone()[0] == 0


def test_no_retention_keeps_everything(clean_db, conn, redis_url):
    old = _jobs(conn, 3, "old")
    _age(conn, old, 400)
    reaper = Reaper(clean_db, redis_url, retain=None)
    try:
        reaper.tick()
    finally:
        reaper.db.close()
        reaper.transport.close()
    assert _count(conn, old) == (3, 9)


def test_jobfence_prune_by_hand(clean_db, conn):
    old, young = _jobs(conn, 12, "old"), _jobs(conn, 2, "young")
    day = past_partition(conn, 2)
    _age(conn, old, 2)
    env = dict(os.environ, JOBFENCE_DATABASE_URL=clean_db)
    out = subprocess.run([sys.executable, "-m", "jobfence", "prune", "--older-than", "86400", "--batch", "5",
                          "--json"], cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["pruned"] == 12
    assert json.loads(out.stdout)["event_partitions_dropped"] == 1 and not _exists(conn, day)
    assert _count(conn, old) == (0, 0) and _count(conn, young) == (2, 6)
    human = subprocess.run([sys.executable, "-m", "jobfence", "prune", "--older-than", "86400"],
                           cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    assert human.returncode == 0 and human.stdout.startswith("pruned 0 finished jobs")
    bad = subprocess.run([sys.executable, "-m", "jobfence", "prune", "--older-than", "-1"],
                         cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
