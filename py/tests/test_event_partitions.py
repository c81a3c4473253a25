"""The day partitions of jobs.event (docs/operations.md "History partitions"): the reaper
keeps them ahead, several callers serialise, and a drop that would wait behind a reader gives
up at once instead of queueing every transition behind it."""

from __future__ import annotations

import threading

import psycopg

from jobfence.db import Database
from jobfence.reaper import Reaper

from conftest import wait_until
from test_retention import past_partition


def _day(conn, offset: int) -> str:
    return conn.execute("SELECT 'jobs.event_' || to_char(date_trunc('day', now(), 'UTC') AT TIME ZONE 'UTC'"
                        " + make_interval(days => %s), 'YYYYMMDD')", (offset,)).fetchone()[0]


def _exists(conn, relation: str) -> bool:
    return conn.execute("SELECT to_regclass(%s) IS NOT NULL", (relation,)).fetchone()[0]


def test_the_reaper_creates_the_partitions_ahead_without_any_retention(clean_db, conn, redis_url):
    ahead = _day(conn, 3)
    conn.execute(f"DROP TABLE IF EXISTS {ahead}")
    reaper = Reaper(clean_db, redis_url, retain=None)
    try:
        reaper.tick()
    finally:
        reaper.db.close()
        reaper.transport.close()
    assert _exists(conn, ahead)


def test_concurrent_creators_serialise_and_the_second_finds_the_work_done(clean_db, conn):
    for offset in range(4, 11):
        conn.execute(f"DROP TABLE IF EXISTS {_day(conn, offset)}")
    results: dict[str, int] = {}
    db = Database(clean_db, max_size=1)
    try:
        with psycopg.connect(clean_db) as first:
            results["first"] = first.execute("SELECT jobs.create_event_partitions('10 days')").fetchone()[0]
            second = threading.Thread(target=lambda: results.update(second=db.create_event_partitions(10 * 86400.0)))
            second.start()
            wait_until(lambda: conn.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted")
                       .fetchone()[0] == 1, what="the second caller waiting for the first")
            first.commit()
        second.join(30)
    finally:
        db.close()
    assert results == {"first": 7, "second": 0}
    assert all(_exists(conn, _day(conn, offset)) for offset in range(0, 11))


def test_a_drop_behind_a_reader_gives_up_and_the_next_call_drops(clean_db, conn):
    day = past_partition(conn, 20)
    db = Database(clean_db, max_size=1)
    try:
        with psycopg.connect(clean_db) as reader:
            reader.execute("SELECT count(*) FROM jobs.event").fetchone()   # holds its lock until commit
            assert db.drop_event_partitions(7 * 86400.0) == 0
            assert _exists(conn, day)
            # Transitions were never queued behind the waiting drop: a submit goes through.
            conn.execute("SELECT jobs.define_type('ep_k')")
            conn.execute("SELECT jobs.submit('ep_k', notify => false)")
        assert db.drop_event_partitions(7 * 86400.0) == 1
        assert not _exists(conn, day)
    finally:
        db.close()
