"""``jobfence audit``'s Redis check (``signalled``, docs/reliability.md): a claimable job left
unsignalled past the resignal bound is reported by id; one signalled in its ready list or
delayed set, one too young to tell, and one that is not claimable are not; an unreachable
Redis is a one-line error with exit 6."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import redis as redis_lib

from conftest import REPO, _free_port
from jobfence.transport import Transport, delayed_key, ready_key

# The command's defaults: --stale-after 5 + 2 x --reaper-interval 5.
BOUND = 15.0


def _audit(database_url, redis_url, *args):
    env = dict(os.environ, JOBFENCE_DATABASE_URL=database_url, JOBFENCE_REDIS_URL=redis_url)
    return subprocess.run([sys.executable, "-m", "jobfence", "audit", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)


def _signalled(out) -> dict:
    assert "Traceback" not in out.stderr, out.stderr
    report = json.loads(out.stdout)
    return next(r for r in report["checks"] if r["check_name"] == "signalled")


def _submit(conn, n=1, kind="s", **kw):
    ids = []
    for _ in range(n):
        ids.append(conn.execute("SELECT id FROM jobs.submit(%s, '{}', ordering_key => %s, notify => false)",
                                (kind, kw.get("ordering_key"))).fetchone()[0])
    return ids


def _age(conn, ids, seconds):
    """Make the jobs' last write and due time ``seconds`` older, as time passing would (the
    functions compare these columns with now() only)."""
    conn.execute("UPDATE jobs.job SET updated_at = updated_at - make_interval(secs => %(s)s), "
                 "run_after = run_after - make_interval(secs => %(s)s), "
                 "created_at = created_at - make_interval(secs => %(s)s), "
                 "due_at = due_at - make_interval(secs => %(s)s) WHERE id = ANY(%(ids)s)",
                 {"s": seconds, "ids": ids})


def _setup(conn):
    conn.execute("SELECT jobs.define_type('s', queue => 'sq')")
    conn.execute("SELECT jobs.define_type('t', queue => 'tq')")


def test_signalled_jobs_are_clean_and_a_lost_signal_is_reported_by_id(conn, clean_db, redis_url):
    _setup(conn)
    ready = _submit(conn, 3) + _submit(conn, 2, kind="t")
    delayed = _submit(conn, 1)
    # Blocked behind an older job of its key: it waits for that one's wake-up, not a signal.
    first, blocked = _submit(conn, 2, kind="t", ordering_key="acct:1")
    young = _submit(conn, 1)
    transport = Transport(redis_url)
    try:
        transport.push([(i, "sq" if i in ready[:3] else "tq", None) for i in ready + [first]])
        # A retry waiting in the delayed set counts as signalled, whatever its score.
        transport.redis.zadd(delayed_key("sq"), {str(delayed[0]): 4102444800})
        _age(conn, ready + delayed + [first, blocked], BOUND + 30)

        clean = _audit(clean_db, redis_url, "--json")
        assert clean.returncode == 0, clean.stdout + clean.stderr
        assert json.loads(clean.stdout)["redis"] is True
        assert _signalled(clean)["violations"] == 0

        # The signal of one job is lost (young is unsignalled too, but within the bound).
        lost = ready[1]
        transport.redis.lrem(ready_key("sq"), 0, str(lost))
        broken = _audit(clean_db, redis_url, "--json")
        assert broken.returncode == 1, broken.stdout + broken.stderr
        row = _signalled(broken)
        assert (row["violations"], row["example_job_ids"]) == (1, [lost])
        assert young[0] not in row["example_job_ids"]

        table = _audit(clean_db, redis_url)
        assert table.returncode == 1
        line = next(ln for ln in table.stdout.splitlines() if ln.startswith("signalled"))
        assert str(lost) in line and "1 check(s) violated" in table.stdout

        # The job is no longer claimable once a worker holds it: nothing to signal.
        conn.execute("SELECT jobs.claim(%s, 'w')", (lost,))
        assert _audit(clean_db, redis_url, "--json").returncode == 0

        skipped = _audit(clean_db, redis_url, "--json", "--no-redis")
        assert skipped.returncode == 0
        report = json.loads(skipped.stdout)
        assert report["redis"] is False
        assert "signalled" not in {r["check_name"] for r in report["checks"]}
    finally:
        transport.close()


def test_a_job_younger_than_the_bound_is_not_reported(conn, clean_db, redis_url):
    _setup(conn)
    job = _submit(conn, 1)
    # Unsignalled, but its last write is within --stale-after + 2 intervals: a reaper tick
    # may still re-push it.
    _age(conn, job, BOUND - 10)
    assert _signalled(_audit(clean_db, redis_url, "--json"))["violations"] == 0
    # Past a shorter bound the same job is reported.
    short = _audit(clean_db, redis_url, "--json", "--stale-after", "1", "--reaper-interval", "1")
    assert short.returncode == 1
    assert _signalled(short)["example_job_ids"] == job


def test_a_large_backlog_is_read_in_slices(conn, clean_db, redis_url):
    # More ids than one LRANGE slice, cursor fetch and ZSCORE pipeline (5000), so the merge
    # crosses slice boundaries; a few signals are lost at both ends and in the middle.
    _setup(conn)
    ids = [r[0] for _ in range(2) for r in conn.execute(
        "SELECT id FROM jobs.submit_many((SELECT jsonb_agg(jsonb_build_object('kind', 's', 'notify', false)) "
        "FROM generate_series(1, 6000)))")]
    lost = {ids[0], ids[4999], ids[5000], ids[7777], ids[-1]}
    in_delayed = set(ids[9000:9100])
    transport = Transport(redis_url)
    try:
        pipe = transport.redis.pipeline(transaction=False)
        keep = [i for i in ids if i not in lost and i not in in_delayed]
        for start in range(0, len(keep), 1000):
            # Pushed out of id order, as concurrent producers and the reaper would.
            pipe.lpush(ready_key("sq"), *map(str, reversed(keep[start:start + 1000])))
        pipe.zadd(delayed_key("sq"), {str(i): 1.0 for i in in_delayed})
        pipe.lpush(ready_key("sq"), "junk", "-4", str(ids[10]))  # junk and a duplicate
        pipe.execute()
        _age(conn, ids, BOUND + 30)
        out = _audit(clean_db, redis_url, "--json", "--examples", "1000")
        assert out.returncode == 1, out.stdout + out.stderr
        row = _signalled(out)
        assert row["violations"] == len(lost)
        assert row["example_job_ids"] == sorted(lost)
    finally:
        transport.close()


def test_a_wrong_type_ready_key_holds_no_signal(conn, clean_db, redis_url):
    _setup(conn)
    job = _submit(conn, 1)
    _age(conn, job, BOUND + 30)
    client = redis_lib.Redis.from_url(redis_url)
    try:
        client.set(ready_key("sq"), "not a list")  # workers skip it, the reaper deletes it
        out = _audit(clean_db, redis_url, "--json")
        assert out.returncode == 1
        assert _signalled(out)["example_job_ids"] == job
    finally:
        client.close()


def test_unreachable_redis_is_a_clear_error(clean_db):
    dead = f"redis://127.0.0.1:{_free_port()}/0"
    out = _audit(clean_db, dead)
    assert out.returncode == 6, out.stdout + out.stderr
    assert "Redis unavailable" in out.stderr and "--no-redis" in out.stderr
    assert "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
    assert _audit(clean_db, dead, "--no-redis").returncode == 0


def test_the_bound_options_are_checked(clean_db, redis_url):
    out = _audit(clean_db, redis_url, "--stale-after", "-1")
    assert out.returncode == 2 and "Traceback" not in out.stderr
