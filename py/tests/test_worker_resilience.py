"""A worker must never crash-loop on what it pops: junk in a ready list, or a server error
that one batch provokes at claim time. Either would stall every queue it serves."""

from __future__ import annotations

import signal

import psycopg
import pytest
import redis as redis_lib

from conftest import wait_until
from jobfence.transport import MAX_JOB_ID, parse_job_id, ready_key

JUNK = [b"99999999999999999999", str(MAX_JOB_ID + 1).encode(), b"0", b"-5", b"abc", b"1.5",
        b" 7", b"+7", b"007", b"", b"1_0", b"7\n", "\u0661".encode()]


def test_parse_job_id_accepts_only_positive_int64():
    assert parse_job_id(b"1") == 1
    assert parse_job_id(str(MAX_JOB_ID).encode()) == MAX_JOB_ID
    assert parse_job_id("42") == 42
    for raw in JUNK:
        assert parse_job_id(raw) is None, raw


def test_worker_discards_junk_signals_and_keeps_working(procs, client):
    r = redis_lib.Redis.from_url(procs.redis_url)
    try:
        # RPUSH: the worker pops from the right, so the junk comes out first.
        r.rpush(ready_key("default"), *JUNK)
    finally:
        r.close()
    w = procs.worker("w1", "--concurrency", "16")
    dropped = w.wait_for("junk_signals_dropped")
    assert sum(e["count"] for e in w.find("junk_signals_dropped")) == len(JUNK)
    assert dropped[0]["level"] == "warning"
    job_id = client.submit("noop", {"after": "junk"})
    assert client.wait(job_id, timeout=15).status == "done"
    assert w.alive()
    assert not w.find("claim_failed")


@pytest.fixture
def poison_trigger(declared):
    """Make claiming any job whose payload has a "poison" key fail with SQLSTATE 22008 (as a
    kind with absurd intervals once did), whatever limits define_type enforces today."""
    with psycopg.connect(declared, autocommit=True) as c:
        c.execute("""
            CREATE OR REPLACE FUNCTION public.jobfence_test_poison() RETURNS trigger
            LANGUAGE plpgsql AS $$
            BEGIN
                RAISE EXCEPTION 'timestamp out of range (test poison)' USING ERRCODE = '22008';
            END $$""")
        c.execute("""
            CREATE TRIGGER jobfence_test_poison BEFORE UPDATE ON jobs.job FOR EACH ROW
            WHEN (NEW.status = 'processing' AND NEW.payload ? 'poison')
            EXECUTE FUNCTION public.jobfence_test_poison()""")
    try:
        yield
    finally:
        with psycopg.connect(declared, autocommit=True) as c:
            c.execute("DROP TRIGGER IF EXISTS jobfence_test_poison ON jobs.job")
            c.execute("DROP FUNCTION IF EXISTS public.jobfence_test_poison()")


def test_claim_error_drops_only_the_poison_signal_and_the_worker_keeps_serving(
        procs, client, poison_trigger, declared):
    good = [client.submit("noop", {"n": n}) for n in range(3)]
    poison = client.submit("noop", {"poison": True})
    more = [client.submit("noop", {"n": n}) for n in range(3, 5)]
    # One pop takes all six ids: the batch's claim_many fails with 22008.
    w = procs.worker("w1", "--concurrency", "16")
    failed = w.wait_for("claim_failed")[0]
    assert failed["level"] == "error" and failed["sqlstate"] == "22008"
    assert poison in failed["job_ids"]
    dropped = w.wait_for("signals_dropped")[0]
    assert dropped["job_ids"] == [poison] and dropped["sqlstates"] == ["22008"]
    # Its batch-mates were claimed one by one, and later work still flows.
    for job_id in good + more + [client.submit("noop", {"n": "later"})]:
        assert client.wait(job_id, timeout=15).status == "done"
    assert w.alive()
    # The poison job was never lost: PostgreSQL still holds it, queued.
    assert client.get(poison).status == "queued"
    # Once the cause is gone, the reaper's stale re-push brings it back.
    with psycopg.connect(declared, autocommit=True) as c:
        c.execute("DROP TRIGGER jobfence_test_poison ON jobs.job")
    procs.reaper()
    assert client.wait(poison, timeout=20).status == "done"
    assert w.alive()


def test_a_database_that_refuses_the_login_for_good_is_one_line_and_exit_6(procs, clean_db):
    """A database that does not exist (or a role that may not log in) will not appear by
    waiting: the worker and the reaper say so once and exit 6 (docs/cli.md), instead of
    retrying forever. A server that is away is retried (test_e2e_chaos)."""
    import subprocess
    import sys

    from conftest import REPO

    missing = clean_db.rsplit("/", 1)[0] + "/jobfence_no_such_database"
    for args in (["worker", "--app", "jobfence.examples:app", "--no-declare"], ["reaper"]):
        done = subprocess.run([sys.executable, "-m", "jobfence", "--log-format", "json", *args],
                              env=dict(procs.env, JOBFENCE_DATABASE_URL=missing),
                              capture_output=True, text=True, timeout=60, cwd=REPO)
        assert done.returncode == 6, (args[0], done.returncode, done.stderr[-2000:])
        refused = [line for line in done.stderr.splitlines() if '"db_refused"' in line]
        assert len(refused) == 1 and "does not exist" in refused[0], done.stderr[-2000:]
        assert "Traceback" not in done.stderr


@pytest.fixture
def cuttable_db(clean_db):
    """The test database behind a loopback proxy the test can cut (PostgreSQL away: every
    connection dropped, new ones closed) and mend, without touching the machine's server."""
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    from jobfence_chaos.proxy import StallProxy

    parts = conninfo_to_dict(clean_db)
    proxy = StallProxy(parts.get("host", "127.0.0.1"), int(parts.get("port", 5432)))
    port = proxy.start()
    try:
        yield proxy, make_conninfo(clean_db, host="127.0.0.1", port=port)
    finally:
        proxy.close()


def test_a_worker_stopped_while_postgresql_is_away_exits_after_its_grace(
        procs, client, cuttable_db):
    """docs/cli.md: after SIGTERM the worker lets running jobs finish within --grace, hands
    back what is left and exits. With PostgreSQL away, nothing can be handed back: the
    worker says so and exits once the grace is spent, instead of retrying its reports for
    another minute. The reaper recovers the job (its lease expires)."""
    proxy, url = cuttable_db
    w = procs.worker("w-grace", "--grace", "1", env={"JOBFENCE_DATABASE_URL": url})
    job = client.submit("sleep", {"seconds": 600})
    w.wait_for("claimed", job_id=job)
    proxy.cut()
    w.signal(signal.SIGTERM)
    # The bound is the grace plus closing down, far below the minute a report would wait.
    assert w.wait(timeout=12) == 0, w.tail()
    assert w.find("report_unfinished") or w.find("db_unavailable"), w.tail()
    assert w.find("worker_stopped"), w.tail()
    proxy.mend()
    procs.reaper()
    wait_until(lambda: client.get(job).status == "queued", 30, what="the reaper requeues it")


def test_the_reaper_says_when_postgresql_went_away_between_two_ticks(procs, cuttable_db):
    """A short outage falls between ticks and the pool rides through it, reconnecting: the
    log still says PostgreSQL was away (docs/reliability.md), once, not a line a tick."""
    proxy, url = cuttable_db
    # Ticks far enough apart that the pool's connections sit idle and are checked.
    r = procs.reaper("--interval", "3", env={"JOBFENCE_DATABASE_URL": url})
    proxy.cut()
    proxy.mend()
    r.wait_for("db_unavailable")
    assert r.alive()


def test_reconnect_backoff_doubles_to_its_cap_with_jitter():
    """Workers that lost PostgreSQL together must not retry together: every delay lies
    between half and all of its doubling step, and two backoffs do not agree."""
    from jobfence.retry import Backoff

    steps = [0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 5.0, 5.0]
    runs = [[b.next() for _ in steps] for b in (Backoff(0.1, 5.0) for _ in range(20))]
    for run in runs:
        assert all(step / 2 <= delay <= step for delay, step in zip(run, steps)), run
    assert len({tuple(run) for run in runs}) == len(runs)
