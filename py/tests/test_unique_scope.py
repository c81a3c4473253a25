"""Scoped idempotency keys and debounce (docs/sql-api.md, "Scoped keys and debounce") end to
end: through the Python client, a real worker, Redis and the HTTP API, and with concurrent
submitters on their own connections."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta, timezone

import psycopg
import redis as redis_lib

from api_helpers import start_api
from jobfence.db import Database
from jobfence.transport import delayed_key


def _events(conn, job_id):
    return [r[0] for r in conn.execute(
        "SELECT reason FROM jobs.history WHERE job_id = %s ORDER BY id", (job_id,)).fetchall()]


def test_a_debounced_job_runs_once_with_the_last_payload_at_the_pushed_time(procs, client, conn, redis_url):
    soon = datetime.now(timezone.utc) + timedelta(seconds=1)
    first = client.submit("sleep", {"seconds": 0.01}, idempotency_key="digest:7", run_after=soon)
    later = soon + timedelta(seconds=1.5)
    again = client.submit("sleep", {"seconds": 0.02}, idempotency_key="digest:7", run_after=later,
                          debounce="payload_and_run_after")
    assert again == first
    # The job's signal moved with it: its delayed entry is scored by the new run_after.
    r = redis_lib.Redis.from_url(redis_url)
    try:
        score = r.zscore(delayed_key("default"), str(first))
    finally:
        r.close()
    assert score == later.timestamp(), (score, later.timestamp())

    procs.worker("w1", "--no-declare")
    done = client.wait(first, timeout=30)
    assert done.status == "done" and done.result == {"slept": 0.02}, done
    assert done.claimed_at >= later, (done.claimed_at, later)
    assert _events(conn, first) == ["submitted", "debounced", "claimed", "completed"]
    assert conn.execute("SELECT count(*) FROM jobs.job WHERE idempotency_key = 'digest:7'").fetchone()[0] == 1


def test_unique_while_frees_the_key_once_its_job_is_done_and_the_next_one_runs(procs, client, conn):
    procs.worker("w1", "--no-declare")
    scope = {"idempotency_key": "refresh:9", "unique_while": ["queued", "processing"]}
    first = client.submit("noop", {"n": 1}, **scope)
    assert client.wait(first, timeout=30).status == "done"
    second = client.submit("noop", {"n": 2}, **scope)
    assert second != first
    assert client.wait(second, timeout=30).status == "done"
    states = conn.execute("SELECT unique_states::text[] FROM jobs.job WHERE id = %s", (second,)).fetchone()[0]
    assert states == ["queued", "processing", "enqueue_failed"]
    assert client.get(second).unique_states == ["queued", "processing", "enqueue_failed"]


def test_unique_for_through_submit_many_takes_seconds_and_interval_text(client, conn):
    ids = client.submit_many([{"kind": "noop", "idempotency_key": "a", "unique_for": 3600},
                              {"kind": "noop", "idempotency_key": "b", "unique_for": "2 hours"},
                              {"kind": "noop", "idempotency_key": "c", "unique_for": timedelta(minutes=5)}])
    periods = dict(conn.execute("SELECT idempotency_key, unique_until - created_at FROM jobs.job "
                                "WHERE id = ANY (%s)", (ids,)).fetchall())
    assert periods == {"a": timedelta(hours=1), "b": timedelta(hours=2), "c": timedelta(minutes=5)}
    assert client.submit_many([{"kind": "noop", "idempotency_key": "a", "unique_for": 3600}]) == ids[:1]


def test_concurrent_submitters_of_a_key_whose_period_ended_make_one_new_job(declared, conn):
    db = Database(declared, max_size=1)
    try:
        old = db.submit("noop", {}, idempotency_key="tick", unique_for=60)
    finally:
        db.close()
    conn.execute("UPDATE jobs.job SET unique_until = now() WHERE id = %s", (old.id,))
    submitters = 8
    barrier = threading.Barrier(submitters)
    got: list[int] = []
    errors: list[BaseException] = []

    def submit():
        try:
            with psycopg.connect(declared, autocommit=True) as c:
                barrier.wait(timeout=30)
                got.append(c.execute("SELECT id FROM jobs.submit('noop', '{}', 'tick', unique_for => '1 minute')").fetchone()[0])
        except BaseException as exc:  # reported below, with the thread's answer
            errors.append(exc)

    threads = [threading.Thread(target=submit) for _ in range(submitters)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors, errors
    assert len(set(got)) == 1 and got[0] != old.id, got
    assert conn.execute("SELECT count(*) FROM jobs.job WHERE idempotency_key = 'tick'").fetchone()[0] == 2


def test_http_api_takes_scopes_and_debounces_instead_of_422(procs, declared):
    api = start_api(procs)
    key = {"Idempotency-Key": "report:3"}
    first = api.post("/jobs", {"kind": "noop", "payload": {"v": 1}, "unique_while": ["queued"]}, headers=key)
    again = api.post("/jobs", {"kind": "noop", "payload": {"v": 2}, "debounce": "payload"}, headers=key)
    assert first.status == 202 and again.status == 200, (first.raw, again.raw)
    assert again.data["id"] == first.data["id"]
    with psycopg.connect(declared) as c:
        assert c.execute("SELECT payload FROM jobs.job WHERE id = %s", (first.data["id"],)).fetchone()[0] == {"v": 2}
    plain = api.post("/jobs", {"kind": "noop", "payload": {"v": 3}}, headers=key)
    assert plain.status == 422, plain.raw  # a repeat that differs without asking for a debounce
    for body, why in (({"kind": "noop", "debounce": "latest"}, "unknown mode"),
                      ({"kind": "noop", "unique_while": ["waiting"]}, "unknown state"),
                      ({"kind": "noop", "unique_while": ["done"]}, "no queued"),
                      ({"kind": "noop", "unique_for": -5}, "negative period"),
                      ({"kind": "noop", "unique_for": "soon"}, "no interval")):
        answer = api.post("/jobs", body, headers={"Idempotency-Key": "bad"})
        assert answer.status == 400, (why, answer.raw)
    batch = api.post("/jobs/batch", {"jobs": [{"kind": "noop", "idempotency_key": "k", "unique_for": "1 hour"}]})
    assert batch.status == 202, batch.raw
    with psycopg.connect(declared) as c:
        assert c.execute("SELECT count(*) FROM jobs.job WHERE idempotency_key = 'bad'").fetchone()[0] == 0
