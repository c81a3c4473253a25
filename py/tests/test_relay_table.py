"""The relay reading new jobs from the table (jobs.configure_relay('table')): submits send no
notification, and jobs.poll_submitted hands each new job out once, only when no running
transaction can still add an id below it — real PostgreSQL, concurrent producers holding
their transactions open and rolling back, and a real `jobfence relay` process."""

from __future__ import annotations

import random
import threading

import psycopg
import pytest

from conftest import wait_until
from role_helpers import login_role, url_as

POLL = "SELECT job_id FROM jobs.poll_submitted()"


def _table(conn) -> None:
    conn.execute("SELECT jobs.configure_relay('table')")


def _poll(conn) -> list[int]:
    return [r[0] for r in conn.execute(POLL)]


# A stretch is handed out once no transaction in the whole cluster that is older than its
# horizon runs, other tests' included: the parallel tests hold transactions open for seconds
# at a time (CI once saw one held past 10 s). Polling returns as soon as they end.
READ_WITHIN_SECONDS = 120


def _read(conn, n: int) -> list[int]:
    """Poll until n jobs came out (see READ_WITHIN_SECONDS)."""
    read: list[int] = []
    wait_until(lambda: read.extend(_poll(conn)) or len(read) >= n, READ_WITHIN_SECONDS,
               what=f"{n} jobs read")
    return read


def _feed(conn) -> tuple:
    return conn.execute("SELECT source, read_upto, horizon_id FROM jobs.relay_feed").fetchone()


def test_submits_send_no_notification_while_the_relay_reads_the_table(conn, declared):
    listener = psycopg.connect(declared, autocommit=True)
    try:
        listener.execute("LISTEN jobs_submitted")
        _table(conn)
        conn.execute("SELECT jobs.submit('noop', '{}'::jsonb)")
        conn.execute("""SELECT jobs.submit_many('[{"kind":"noop"},{"kind":"noop"}]'::jsonb)""")
        # One session's notifications arrive in commit order: the marker comes after anything
        # the submits would have sent.
        conn.execute("NOTIFY jobs_submitted, 'marker'")
        notes = list(listener.notifies(timeout=5, stop_after=1))
    finally:
        listener.close()
    assert [n.payload for n in notes] == ["marker"]
    assert len(_read(conn, 3)) == 3


def test_an_open_transaction_holds_the_reading_back_and_loses_nothing(conn, declared):
    _table(conn)
    slow = psycopg.connect(declared)
    try:
        early = slow.execute("SELECT id FROM jobs.submit('noop', '{}'::jsonb)").fetchone()[0]
        late = conn.execute("SELECT id FROM jobs.submit('noop', '{}'::jsonb)").fetchone()[0]
        assert early < late
        # The later id has committed, but the earlier one may still: nothing is handed out.
        assert _poll(conn) == [] and _poll(conn) == []
        slow.commit()
    finally:
        slow.close()
    assert _read(conn, 2) == [early, late]
    assert _poll(conn) == [] and _poll(conn) == []  # each job once


def test_each_job_is_read_once_under_concurrent_submitters(conn, declared):
    _table(conn)
    committed: list[int] = []
    lock = threading.Lock()
    errors: list[BaseException] = []

    def produce(seed: int) -> None:
        rng = random.Random(seed)
        try:
            with psycopg.connect(declared) as c:
                for _ in range(60):
                    ids = [r[0] for r in c.execute(
                        """SELECT id FROM jobs.submit_many(jsonb_build_array(
                               jsonb_build_object('kind', 'noop'), jsonb_build_object('kind', 'noop')))""")]
                    # Hold some transactions open while the others commit, roll some back.
                    if rng.random() < 0.3:
                        threading.Event().wait(rng.uniform(0.001, 0.02))
                    if rng.random() < 0.1:
                        c.rollback()
                    else:
                        c.commit()
                        with lock:
                            committed.extend(ids)
        except BaseException as exc:  # noqa: BLE001 — re-raised by the test below
            errors.append(exc)

    producers = [threading.Thread(target=produce, args=(n,)) for n in range(4)]
    for t in producers:
        t.start()
    read: list[int] = []
    while any(t.is_alive() for t in producers):
        read += _poll(conn)
    for t in producers:
        t.join()
    assert not errors
    read += _read(conn, len(committed) - len(read))
    read += _poll(conn) + _poll(conn)
    assert sorted(read) == sorted(committed)  # none lost, none twice, no rolled-back id


def test_switching_back_to_notify_reads_what_is_left_then_stops(conn, declared):
    _table(conn)
    slow = psycopg.connect(declared)
    try:
        held = slow.execute("SELECT id FROM jobs.submit('noop', '{}'::jsonb)").fetchone()[0]
        assert _poll(conn) == []
        conn.execute("SELECT jobs.configure_relay('notify')")
        assert _feed(conn)[1] is not None  # a stretch is still unread
        slow.commit()
    finally:
        slow.close()
    assert _read(conn, 1) == [held]
    wait_until(lambda: _poll(conn) == [] and _feed(conn)[1] is None, READ_WITHIN_SECONDS,
               what="the reading to stop")
    assert _feed(conn)[0] == "notify"


def test_a_second_reader_gets_nothing_while_one_reads(conn, declared):
    _table(conn)
    conn.execute("SELECT jobs.submit('noop', '{}'::jsonb)")
    with psycopg.connect(declared) as other:
        other.execute("SELECT pg_advisory_xact_lock(hashtext('jobs.relay_feed'))")
        assert [_poll(conn) for _ in range(3)] == [[], [], []]
        assert _feed(conn)[2] is None  # not even a horizon taken
    assert len(_read(conn, 1)) == 1


@pytest.mark.parametrize("isolation", ["repeatable read", "serializable"])
def test_the_reading_refuses_a_snapshot_older_than_itself(conn, declared, isolation):
    _table(conn)
    conn.execute("SELECT jobs.submit('noop', '{}'::jsonb)")
    before = _feed(conn)
    with psycopg.connect(declared) as c:
        c.execute(f"SET TRANSACTION ISOLATION LEVEL {isolation}")
        with pytest.raises(psycopg.Error) as caught:
            c.execute(POLL)
        assert caught.value.sqlstate == "22023"
        assert "READ COMMITTED" in str(caught.value)
    assert _feed(conn) == before


@pytest.mark.parametrize("call, message", [
    ("SELECT * FROM jobs.poll_submitted(0)", "max_ids"),
    ("SELECT * FROM jobs.poll_submitted(NULL)", "max_ids"),
    ("SELECT * FROM jobs.configure_relay('redis')", "notify or table"),
])
def test_bad_input_is_refused_and_changes_nothing(conn, declared, call, message):
    before = _feed(conn)
    with pytest.raises(psycopg.Error) as caught:
        conn.execute(call)
    assert caught.value.sqlstate == "22023" and message in str(caught.value)
    assert _feed(conn) == before


def test_only_an_admin_chooses_the_source_or_reads_the_table(conn, declared):
    for group in ("jobs_producer", "jobs_worker"):
        with login_role(declared, group) as role, psycopg.connect(url_as(declared, role), autocommit=True) as c:
            for call in ("SELECT jobs.configure_relay('table')", POLL):
                with pytest.raises(psycopg.errors.InsufficientPrivilege):
                    c.execute(call)
    assert _feed(conn)[0] == "notify"


def test_the_relay_moves_jobs_that_announce_nothing(procs, declared, client, conn):
    _table(conn)
    procs.worker("w1")
    relay = procs.start("relay", "relay", "--poll-interval", "0.5", "--stale-after", "3600")
    relay.wait_for("relay_source", source="table")
    ids = [conn.execute("SELECT id FROM jobs.submit('noop', '{}'::jsonb)").fetchone()[0] for _ in range(5)]
    ids += [r[0] for r in conn.execute(
        """SELECT id FROM jobs.submit_many('[{"kind":"noop"},{"kind":"noop"},{"kind":"noop"}]'::jsonb)""")]
    wait_until(lambda: all(client.get(i).status == "done" for i in ids), READ_WITHIN_SECONDS,
               what="jobs read from the table done")
