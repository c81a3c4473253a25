"""Periodic jobs on real PostgreSQL and Redis: the reaper ticks schedules on time, a worker runs
what they enqueue, concurrent tickers (threads and processes) make one job per tick, the missed
policies after downtime, ``@app.periodic``, the CLI and the HTTP routes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import textwrap
from datetime import datetime, timedelta, timezone

import psycopg
import pytest
import redis as redis_lib

from api_helpers import ADMIN_TOKEN, PRODUCER_TOKEN, start_api
from conftest import REPO, wait_until

from jobfence import App, Client
from jobfence.db import Database
from jobfence.reaper import Reaper
from jobfence.schedules import ScheduleError, latest_at_or_before, listing, next_after
from jobfence.transport import ready_key

PROBLEM = "application/problem+json"


def _reaper(url, redis_url, interval=0.2):
    # In-process, for tests that tick by hand: the same Ticker the process runs.
    return Reaper(url, redis_url, interval=interval, retain=None)


def _close(reaper):
    reaper.db.close()
    reaper.transport.close()


def _rows(conn, name):
    return conn.execute("SELECT id, idempotency_key, status::text FROM jobs.job "
                        "WHERE idempotency_key LIKE %s ORDER BY id", (f"schedule:{name}:%",)).fetchall()


def _schedule(conn, name):
    with conn.cursor(row_factory=psycopg.rows.dict_row) as cur:
        return cur.execute("SELECT * FROM jobs.schedule WHERE name = %s", (name,)).fetchone()


def _back(conn, name, by):
    """Downtime, simulated: the schedule was last ticked ``by`` ago."""
    conn.execute("UPDATE jobs.schedule SET ticked_through = now() - %s::interval, next_tick = NULL "
                 "WHERE name = %s", (by, name))


def _ready(redis_url, queue="default"):
    r = redis_lib.Redis.from_url(redis_url)
    try:
        return [int(x) for x in r.lrange(ready_key(queue), 0, -1)]
    finally:
        r.close()


def _jobfence(url, redis_url, *args):
    env = dict(os.environ, JOBFENCE_DATABASE_URL=url, JOBFENCE_REDIS_URL=redis_url)
    return subprocess.run([sys.executable, "-m", "jobfence", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=60)


# -- cron arithmetic --------------------------------------------------------------------------
def test_cron_arithmetic_in_the_schedules_time_zone():
    from zoneinfo import ZoneInfo

    at = datetime(2026, 3, 28, 23, 30, 5, 250000, tzinfo=timezone.utc)
    utc = ZoneInfo("UTC")
    assert latest_at_or_before("*/5 * * * *", utc, at) == datetime(2026, 3, 28, 23, 30, tzinfo=timezone.utc)
    assert latest_at_or_before("* * * * * *", utc, at) == datetime(2026, 3, 28, 23, 30, 5, tzinfo=timezone.utc)
    exact = datetime(2026, 3, 28, 23, 30, tzinfo=timezone.utc)
    assert latest_at_or_before("*/5 * * * *", utc, exact) == exact, "a tick at the instant is due"
    assert next_after("*/5 * * * *", utc, exact) == datetime(2026, 3, 28, 23, 35, tzinfo=timezone.utc)
    # 09:00 in Tokyo is 00:00 UTC; 02:30 Paris does not exist on 2026-03-29 (DST): cron's
    # rule runs it at the first minute that does exist, 03:00 CEST = 01:00 UTC.
    assert next_after("0 9 * * *", ZoneInfo("Asia/Tokyo"), at) == datetime(2026, 3, 29, 0, 0, tzinfo=timezone.utc)
    assert next_after("30 2 * * *", ZoneInfo("Europe/Paris"), at) == datetime(2026, 3, 29, 1, 0, tzinfo=timezone.utc)


# -- the reaper ticks, a worker runs --------------------------------------------------------
def _tick_of(key: str) -> datetime:
    return datetime.fromisoformat(key.split(":", 2)[2].replace("Z", "+00:00"))


def test_reaper_process_ticks_on_time_and_a_worker_runs_the_jobs(procs, client, conn):
    client.schedule("every2s", "*/2 * * * * *", "noop", {"from": "schedule"})
    procs.reaper()
    procs.worker("w1")

    def done():
        finished = [r for r in _rows(conn, "every2s") if r[2] == "done"]
        return finished if len(finished) >= 2 else None

    finished = wait_until(done, 30, what="two scheduled jobs done")
    for job_id, key, _ in finished:
        tick = _tick_of(key)
        assert tick.second % 2 == 0 and tick.microsecond == 0, key
        job = client.get(job_id)
        assert job.kind == "noop" and job.payload == {"from": "schedule"}
        # On time: enqueued within a few reaper intervals (0.3 s) of its tick. The bound is
        # generous for a loaded machine; it is read from the rows, not timed by the test.
        assert timedelta(0) <= job.created_at - tick < timedelta(seconds=5), (job.created_at, tick)
    row = _schedule(conn, "every2s")
    assert row["last_job_id"] >= finished[-1][0] and row["next_tick"] > row["last_tick"]


def test_reaper_with_no_schedules_enqueues_nothing(procs, client, conn):
    client.schedule("every1s", "* * * * * *", "noop")
    _back(conn, "every1s", "1 hour")
    procs.reaper("--no-schedules")
    # A job submitted without a signal: once the reaper's stale sweep pushed it, the reaper
    # has ticked after the schedule was due.
    unsignalled = conn.execute("SELECT id FROM jobs.submit('noop', notify => false)").fetchone()[0]
    wait_until(lambda: unsignalled in _ready(procs.redis_url), 20, what="a reaper tick")
    assert _rows(conn, "every1s") == []
    assert _schedule(conn, "every1s")["next_tick"] is None


# -- exactly once per tick, however many tickers ---------------------------------------------
def test_concurrent_tickers_in_threads_enqueue_each_tick_once(declared, redis_url, conn):
    with Client(declared, redis_url) as c:
        for i in range(20):
            # Yearly, not every minute: a minute boundary passed while the tickers ran would
            # make a second tick due and a second job per schedule.
            c.schedule(f"par{i:02d}", "0 0 1 1 *", "noop", {"i": i})
    conn.execute("UPDATE jobs.schedule SET ticked_through = now() - interval '18 months'")
    reapers = [_reaper(declared, redis_url) for _ in range(4)]
    start = threading.Barrier(len(reapers))
    made: list[int] = []
    errors: list[BaseException] = []

    def run(reaper):
        try:
            start.wait(10)
            for _ in range(3):
                made.append(reaper.schedules.tick(reaper._push))
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(r,)) for r in reapers]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    finally:
        for r in reapers:
            _close(r)
    assert not errors, errors
    jobs = conn.execute("SELECT id, payload->>'i', idempotency_key FROM jobs.job ORDER BY id").fetchall()
    assert len(jobs) == 20 and sum(made) == 20, (len(jobs), made)
    assert sorted(int(i) for _, i, _ in jobs) == list(range(20))
    # One push per job: a second ticker that found the tick handled pushed nothing.
    assert sorted(_ready(redis_url)) == sorted(j for j, _, _ in jobs)
    submitted = conn.execute("SELECT count(*) FROM jobs.history WHERE reason = 'submitted'").fetchone()[0]
    assert submitted == 20
    for j, i, key in jobs:
        row = _schedule(conn, f"par{int(i):02d}")
        assert row["last_job_id"] == j and key.endswith(row["last_tick"].astimezone(timezone.utc)
                                                        .strftime("%Y-%m-%dT%H:%M:%SZ"))
        assert row["ticked_through"] == row["last_tick"] and row["next_tick"] > row["last_tick"]


def test_three_reaper_processes_make_one_job_per_tick(procs, client, conn):
    client.schedule("every1s", "* * * * * *", "noop")
    reapers = [procs.start(f"reaper{i}", "reaper", "--interval", "0.1", "--stale-after", "300")
               for i in range(3)]
    for r in reapers:
        r.wait_for("reaper_ready")
    wait_until(lambda: len(_rows(conn, "every1s")) >= 5, 30, what="five ticks enqueued")
    for r in reapers:
        r.kill()
    jobs = _rows(conn, "every1s")
    ticks = [key.split(":", 2)[2] for _, key, _ in jobs]
    assert len(set(ticks)) == len(ticks)
    # Ids follow ticks: the schedule's row lock serialises the tickers, so no later tick's
    # job was created before an earlier one's.
    assert ticks == sorted(ticks)
    events = conn.execute("SELECT job_id, count(*) FROM jobs.history WHERE reason = 'submitted' "
                          "GROUP BY job_id").fetchall()
    assert sorted(j for j, n in events if n == 1) == [j for j, _, _ in jobs]
    # Each job was signalled once, by the one ticker that created it.
    assert sorted(_ready(procs.redis_url)) == [j for j, _, _ in jobs]
    row = _schedule(conn, "every1s")
    assert row["last_job_id"] == jobs[-1][0] and row["ticked_through"] == row["last_tick"]


# -- missed ticks after downtime ----------------------------------------------------------------
def test_missed_once_enqueues_the_latest_missed_tick_and_skip_none(client, redis_url, conn):
    now = conn.execute("SELECT now()").fetchone()[0]
    client.schedule("yearly_once", "0 0 1 1 *", "noop", missed="once")
    client.schedule("yearly_skip", "0 0 1 1 *", "noop", missed="skip")
    client.schedule("minutely_once", "* * * * *", "noop")
    for name in ("yearly_once", "yearly_skip"):
        _back(conn, name, "3 years")
    _back(conn, "minutely_once", "1 hour")
    reaper = _reaper(client.db.url, redis_url)
    minute = "SELECT date_trunc('minute', clock_timestamp())"
    try:
        before = conn.execute(minute).fetchone()[0]
        assert reaper.schedules.tick(reaper._push) == 2
        again = reaper.schedules.tick(reaper._push)
        crossed = conn.execute(minute).fetchone()[0] > before
    finally:
        _close(reaper)
    # A minute that begins between the two passes is a tick of minutely_once truly due.
    assert again == 0 or (crossed and again == 1), \
        "a second pass finds nothing due but a minute begun since"
    this_year = datetime(now.year, 1, 1, tzinfo=timezone.utc)
    (once,) = _rows(conn, "yearly_once")
    assert once[1] == f"schedule:yearly_once:{this_year:%Y-%m-%dT%H:%M:%SZ}", \
        "once: only the latest of three missed ticks"
    assert _rows(conn, "yearly_skip") == [], "skip: nothing for the missed period"
    skipped = _schedule(conn, "yearly_skip")
    assert skipped["last_tick"] is None and skipped["ticked_through"] >= this_year
    assert skipped["next_tick"] == datetime(now.year + 1, 1, 1, tzinfo=timezone.utc)
    minutely = _rows(conn, "minutely_once")
    assert len(minutely) == 1 + again
    tick = _tick_of(minutely[0][1])
    assert tick.second == 0 and tick > now - timedelta(minutes=1), \
        "once: one job, for the latest of sixty missed minutes"


def test_skip_still_runs_a_tick_that_is_only_just_due(client, redis_url, conn):
    client.schedule("every1s_skip", "* * * * * *", "noop", missed="skip")
    _back(conn, "every1s_skip", "1 hour")
    reaper = _reaper(client.db.url, redis_url)
    try:
        assert reaper.schedules.tick(reaper._push) == 1
    finally:
        _close(reaper)
    assert len(_rows(conn, "every1s_skip")) == 1, "the latest tick is seconds old: on time"


def test_a_new_schedule_gets_its_next_tick_and_no_past_one(client, redis_url, conn):
    stored = client.schedule("tokyo_morning", "0 9 * * *", "noop", timezone="Asia/Tokyo")
    assert stored["created"] and stored["next_tick"] is None
    reaper = _reaper(client.db.url, redis_url)
    try:
        assert reaper.schedules.tick(reaper._push) == 0
    finally:
        _close(reaper)
    row = _schedule(conn, "tokyo_morning")
    assert row["next_tick"] is not None and row["next_tick"].astimezone(timezone.utc).hour == 0
    assert _rows(conn, "tokyo_morning") == []
    listed = {r["name"]: r for r in client.schedules()}
    assert listed["tokyo_morning"]["next_tick"] == row["next_tick"]


def test_a_schedule_no_parser_reads_is_reported_and_does_not_stop_the_others(
        client, redis_url, conn, caplog):
    # Passes the SQL's cheap check (31 is a day of month), but February has no 31st.
    conn.execute("SELECT jobs.schedule('feb31', '0 0 31 2 *', 'noop')")
    # Yearly: the second pass cannot find a new tick due, whatever minute the test runs in.
    client.schedule("good", "0 0 1 1 *", "noop")
    _back(conn, "good", "2 years")
    reaper = _reaper(client.db.url, redis_url)
    try:
        with caplog.at_level("WARNING", logger="jobfence.schedules"):
            assert reaper.schedules.tick(reaper._push) == 1
            reaper.schedules.tick(reaper._push)
    finally:
        _close(reaper)
    failed = [r for r in caplog.records if getattr(r, "event", None) == "schedule_failed"]
    assert len(failed) == 1, "reported once, not at every tick"
    assert failed[0].fields["schedule"] == "feb31"
    assert len(_rows(conn, "good")) == 1


def test_redis_down_parks_the_tick_for_recovery(client, conn, redis_server):
    client.schedule("offline", "* * * * *", "noop")
    _back(conn, "offline", "1 hour")
    url = redis_server.url
    redis_server.stop()
    reaper = _reaper(client.db.url, url)
    try:
        assert reaper.schedules.tick(reaper._push) == 1
    finally:
        _close(reaper)
    (job,) = _rows(conn, "offline")
    assert job[2] == "enqueue_failed", "the job is durable and the reaper's recovery signals it"


# -- client validation and unschedule ---------------------------------------------------------
def test_client_refuses_what_no_ticker_could_read(client, conn):
    for cron in ("61 * * * *", "* * *", "", "0 0 31 2 *"):
        with pytest.raises(ScheduleError):
            client.schedule("bad", cron, "noop")
    with pytest.raises(ScheduleError):
        client.schedule("bad", "* * * * *", "noop", timezone="Mars/Olympus")
    with pytest.raises(ScheduleError):
        client.schedule("bad", "* * * * *", "noop", missed="later")
    from jobfence.errors import UnknownKind

    with pytest.raises(UnknownKind):
        client.schedule("bad", "* * * * *", "nosuchkind")
    assert client.schedules() == []
    client.schedule("gone", "* * * * *", "noop")
    assert client.unschedule("gone") is True and client.unschedule("gone") is False


# -- @app.periodic --------------------------------------------------------------------------
def test_app_periodic_declares_and_the_worker_syncs_them(clean_db, redis_url, conn):
    app = App("sched")

    @app.periodic("*/5 * * * *", payload={"scope": "all"})
    @app.task("cleanup")
    def cleanup(job_id, payload, ctx):
        return None

    @app.periodic("0 3 * * *", timezone="Europe/Paris", missed="skip")
    def nightly_report(job_id, payload, ctx):
        return None

    @app.periodic("0 4 * * *", name="cleanup_late")
    @app.task("cleanup_b")
    def cleanup_b(job_id, payload, ctx):
        return None

    assert set(app.tasks) == {"cleanup", "nightly_report", "cleanup_b"}
    assert app.periodics["cleanup"].kind == "cleanup"
    assert app.periodics["nightly_report"].timezone == "Europe/Paris"
    with pytest.raises(ValueError):
        app.periodic("61 * * * *")
    with pytest.raises(ValueError):
        app.periodic("* * * * *", name="cleanup")(cleanup)

    db = Database(clean_db, max_size=1, open_timeout=10)
    try:
        app.declare(db)
        rows = {r["name"]: r for r in listing(db)}
        assert rows["cleanup"]["payload"] == {"scope": "all"} and rows["cleanup"]["cron"] == "*/5 * * * *"
        assert rows["nightly_report"]["missed"] == "skip"
        assert rows["cleanup_late"]["kind"] == "cleanup_b"
        # An operator's disable, and a schedule the app stopped declaring, survive a restart.
        conn.execute("SELECT jobs.schedule('cleanup', '*/5 * * * *', 'cleanup', '{\"scope\": \"all\"}', enabled => false)")
        conn.execute("SELECT jobs.schedule('retired', '* * * * *', 'cleanup')")
        app.declare(db)
        enabled = dict(conn.execute("SELECT name, enabled FROM jobs.schedules()").fetchall())
        assert enabled["cleanup"] is False and "retired" in enabled
    finally:
        db.close()


def test_worker_declare_only_upserts_the_schedules(clean_db, redis_url, tmp_path, conn):
    (tmp_path / "periodic_app.py").write_text(textwrap.dedent("""
        from jobfence import App
        app = App("periodic")

        @app.periodic("*/15 * * * *")
        @app.task("tidy")
        def tidy(job_id, payload, ctx):
            return None
    """))
    out = _jobfence(clean_db, redis_url, "worker", "--app", "periodic_app:app", "--app-dir",
                    str(tmp_path), "--declare-only")
    assert out.returncode == 0, out.stderr
    assert "declared 1 schedules: tidy" in out.stdout
    assert conn.execute("SELECT cron FROM jobs.schedules() WHERE name = 'tidy'").fetchone() == ("*/15 * * * *",)
    (tmp_path / "broken_app.py").write_text(textwrap.dedent("""
        from jobfence import App
        app = App("broken")

        @app.periodic("99 * * * *")
        def tidy(job_id, payload, ctx):
            return None
    """))
    bad = _jobfence(clean_db, redis_url, "worker", "--app", "broken_app:app", "--app-dir",
                    str(tmp_path), "--declare-only")
    assert bad.returncode == 2 and "Bad minute" in bad.stderr and "Traceback" not in bad.stderr


# -- CLI ------------------------------------------------------------------------------------
def test_cli_schedule_list_and_unschedule(declared, redis_url, conn):
    empty = _jobfence(declared, redis_url, "schedules")
    assert empty.returncode == 0 and "no schedules" in empty.stderr
    made = _jobfence(declared, redis_url, "schedule", "nightly", "0  3 * * *", "noop",
                     "--payload", '{"full": true}', "--timezone", "Europe/Paris", "--missed", "skip")
    assert made.returncode == 0, made.stderr
    assert made.stdout.strip() == "scheduled nightly: noop at '0 3 * * *' (Europe/Paris, missed=skip)"
    again = _jobfence(declared, redis_url, "schedule", "nightly", "0 4 * * *", "noop", "--disable", "--json")
    assert again.returncode == 0, again.stderr
    answer = json.loads(again.stdout)
    assert answer["created"] is False and answer["schedule"]["cron"] == "0 4 * * *"
    assert answer["schedule"]["enabled"] is False and answer["schedule"]["timezone"] == "UTC"

    reaper = _reaper(declared, redis_url)
    try:
        _jobfence(declared, redis_url, "schedule", "nightly", "0 4 * * *", "noop", "--enable")
        reaper.schedules.tick(reaper._push)
    finally:
        _close(reaper)
    listed = _jobfence(declared, redis_url, "schedules")
    assert listed.returncode == 0
    header, _rule, line = listed.stdout.splitlines()
    assert header.split() == ["name", "cron", "timezone", "kind", "missed", "enabled", "last_tick",
                              "last_job_id", "next_tick"]
    assert line.startswith("nightly") and line.rstrip().endswith("04:00:00.000Z")
    as_json = json.loads(_jobfence(declared, redis_url, "schedules", "--json").stdout)
    assert as_json["schedules"][0]["next_tick"].endswith("04:00:00+00:00")

    for args, code, text in ((["schedule", "x", "61 * * * *", "noop"], 2, "Bad minute"),
                             (["schedule", "x", "* * * * *", "noop", "--timezone", "Nowhere"], 2, "Nowhere"),
                             (["schedule", "x", "* * * * *", "noop", "--missed", "later"], 2, "later"),
                             (["schedule", "x", "* * * * *", "noop", "--payload", "[1"], 2, "not JSON"),
                             (["schedule", "x", "* * * * *", "nosuchkind"], 5, "JB005"),
                             (["schedule", "bad name", "* * * * *", "noop"], 5, "22023"),
                             (["unschedule", "nosuch"], 3, "no schedule named 'nosuch'")):
        out = _jobfence(declared, redis_url, *args)
        assert out.returncode == code, (args, out.returncode, out.stderr)
        assert text in out.stderr and "Traceback" not in out.stderr, (args, out.stderr)
    gone = _jobfence(declared, redis_url, "unschedule", "nightly")
    assert gone.returncode == 0 and gone.stdout.strip() == "unscheduled nightly"
    assert conn.execute("SELECT count(*) FROM jobs.schedules()").fetchone()[0] == 0


# -- HTTP -----------------------------------------------------------------------------------
def test_http_schedules_routes_and_scopes(procs, declared, conn):
    api = start_api(procs)
    assert api.get("/schedules").data == {"schedules": []}
    body = {"cron": "*/10 * * * *", "kind": "noop", "payload": {"a": 1}, "timezone": "Europe/Paris"}
    refused = api.call("PUT", "/schedules/tenmin", body)
    assert refused.status == 403 and refused.media_type == PROBLEM
    assert api.call("DELETE", "/schedules/tenmin").status == 403
    assert api.get("/schedules", token=None).status == 401

    api.token = ADMIN_TOKEN
    made = api.call("PUT", "/schedules/tenmin", body)
    assert made.status == 201, made.raw
    assert made.data["cron"] == "*/10 * * * *" and made.data["payload"] == {"a": 1}
    assert made.data["missed"] == "once" and made.data["enabled"] is True
    same = api.call("PUT", "/schedules/tenmin", body)
    assert same.status == 200 and same.data["ticked_through"] == made.data["ticked_through"]
    paused = api.call("PUT", "/schedules/tenmin", dict(body, enabled=False, missed="skip"))
    assert paused.status == 200 and paused.data["enabled"] is False

    def problem(answer, status, name, sqlstate):
        assert answer.status == status and answer.media_type == PROBLEM, (answer.status, answer.raw)
        assert answer.data["name"] == name and answer.data["sqlstate"] == sqlstate, answer.data
        return answer.data

    assert problem(api.call("PUT", "/schedules/x", dict(body, cron="61 * * * *")), 400,
                   "invalid_parameter_value", None)["errors"][0]["location"] == "body.cron"
    assert problem(api.call("PUT", "/schedules/x", dict(body, timezone="Mars/Olympus")), 400,
                   "invalid_parameter_value", None)["errors"][0]["location"] == "body.timezone"
    problem(api.call("PUT", "/schedules/x", dict(body, kind="nosuchkind")), 422, "unknown_kind", "JB005")
    problem(api.call("PUT", "/schedules/bad%20name", body), 400, "invalid_parameter_value", "22023")
    problem(api.call("PUT", "/schedules/x", dict(body, missed="later")), 400, "bad_request", None)
    problem(api.call("PUT", "/schedules/x", dict(body, extra=1)), 400, "bad_request", None)

    listed = api.get("/schedules", token=PRODUCER_TOKEN)
    assert [s["name"] for s in listed.data["schedules"]] == ["tenmin"]
    assert listed.data["schedules"][0]["next_tick"] is None

    api.token = ADMIN_TOKEN
    assert api.call("DELETE", "/schedules/tenmin").status == 204
    problem(api.call("DELETE", "/schedules/tenmin"), 404, "schedule_not_found", None)
    assert conn.execute("SELECT count(*) FROM jobs.schedules()").fetchone()[0] == 0
