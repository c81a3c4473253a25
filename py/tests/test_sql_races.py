"""The SQL package under real concurrency: several sessions, each on its own connection,
released together by a barrier. No driver code involved: these call jobs.* directly, as a
client in any language would."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import psycopg
import pytest
from psycopg import errors

THREADS = 8


def run_together(database_url, fn, n=THREADS):
    """Run fn(conn, i) in n threads with their own autocommit connections, started at once."""
    barrier = threading.Barrier(n)

    def task(i):
        with psycopg.connect(database_url, autocommit=True) as c:
            barrier.wait(timeout=30)
            return fn(c, i)

    with ThreadPoolExecutor(max_workers=n) as pool:
        return list(pool.map(task, range(n)))


def poll(predicate, timeout=20.0, interval=0.02):
    """Wait until predicate() is truthy or fail after timeout (never a bare sleep)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"condition not met within {timeout}s")


def submit(conn, kind="t", **kw):
    cols = ", ".join(f"{k} => %({k})s" for k in kw)
    sql = f"SELECT id FROM jobs.submit(%(kind)s{', ' + cols if cols else ''})"
    return conn.execute(sql, {"kind": kind, **kw}).fetchone()[0]


@pytest.fixture
def kind(conn):
    conn.execute("SELECT jobs.define_type('t')")
    return "t"


def test_racing_claims_on_one_id_yield_exactly_one_lease(conn, clean_db, kind):
    for _ in range(10):
        job_id = submit(conn)

        def claim(c, i):
            return c.execute("SELECT lease_version FROM jobs.claim(%s, %s)", (job_id, f"w{i}")).fetchall()

        leases = [rows for rows in run_together(clean_db, claim) if rows]
        assert len(leases) == 1, leases
        assert leases[0] == [(1,)]
        owner, version = conn.execute(
            "SELECT owned_by, lease_version FROM jobs.job WHERE id = %s", (job_id,)).fetchone()
        assert version == 1 and owner.startswith("w")


def test_workers_draining_2000_jobs_with_claim_next_claim_each_exactly_once(conn, clean_db, kind):
    conn.execute(
        "SELECT count(*) FROM jobs.submit_many(%s)",
        (json.dumps([{"kind": "t", "payload": {"n": i}, "notify": False} for i in range(2000)]),))

    def drain(c, i):
        worker = f"w{i}"
        claimed = []
        while True:
            rows = c.execute("SELECT job_id, lease_version FROM jobs.claim_next(%s, NULL, 7)", (worker,)).fetchall()
            if not rows:
                return claimed
            for job_id, version in rows:
                c.execute("SELECT jobs.complete(%s, %s, %s, %s)", (job_id, worker, version, json.dumps({"by": worker})))
                claimed.append(job_id)

    per_worker = run_together(clean_db, drain)
    counts = Counter(job_id for ids in per_worker for job_id in ids)
    assert len(counts) == 2000
    assert set(counts.values()) == {1}
    assert sum(1 for ids in per_worker if ids) > 1, "the work was not shared"
    assert conn.execute("SELECT count(*) FROM jobs.job WHERE status = 'done'").fetchone()[0] == 2000
    claims = conn.execute("SELECT count(*) FROM jobs.history WHERE reason = 'claimed'").fetchone()[0]
    assert claims == 2000


def test_two_reapers_count_each_expiry_once(conn, clean_db, kind):
    conn.execute("SELECT count(*) FROM jobs.submit_many(%s)",
                 (json.dumps([{"kind": "t", "notify": False}] * 500),))
    conn.execute("SELECT count(*) FROM jobs.claim_next('crashed', NULL, 500)")
    # The crashed worker's leases ran out a while ago.
    conn.execute("UPDATE jobs.job SET lease_expires_at = now() - interval '1 minute'")

    def reap(c, i):
        ids = []
        while True:
            rows = c.execute("SELECT job_id FROM jobs.reap(37)").fetchall()
            if not rows:
                return ids
            ids.extend(r[0] for r in rows)

    results = run_together(clean_db, reap, n=2)
    reaped = Counter(job_id for ids in results for job_id in ids)
    assert len(reaped) == 500 and set(reaped.values()) == {1}
    rows = conn.execute(
        "SELECT status, retry_count, lease_version, count(*) FROM jobs.job GROUP BY 1, 2, 3").fetchall()
    assert rows == [("queued", 1, 2, 500)]
    assert conn.execute("SELECT count(*) FROM jobs.event WHERE reason = 'reaped'").fetchone()[0] == 500


def test_lease_expiring_in_real_time_fences_out_the_old_worker(conn, clean_db):
    conn.execute("SELECT jobs.define_type('quick', lease_timeout => '300 milliseconds', timeout => '10 seconds')")
    job_id = submit(conn, "quick")
    (old_version,) = conn.execute("SELECT lease_version FROM jobs.claim(%s, 'old')", (job_id,)).fetchone()

    def reaped():
        return conn.execute("SELECT job_id FROM jobs.reap()").fetchall()

    assert poll(reaped) == [(job_id,)]
    (new_version,) = conn.execute("SELECT lease_version FROM jobs.claim(%s, 'new')", (job_id,)).fetchone()
    assert new_version == old_version + 2  # one bump for the requeue, one for the new claim

    with pytest.raises(psycopg.Error) as lost:
        conn.execute("SELECT jobs.complete(%s, 'old', %s, '{\"by\": \"old\"}')", (job_id, old_version))
    assert lost.value.sqlstate == "JB001"
    outcome = conn.execute(
        "SELECT accepted, status FROM jobs.complete(%s, 'new', %s, '{\"by\": \"new\"}')", (job_id, new_version)).fetchone()
    assert outcome == (True, "done")
    assert conn.execute("SELECT result FROM jobs.get(%s)", (job_id,)).fetchone()[0] == {"by": "new"}


def test_stale_worker_effects_roll_back_with_its_rejected_completion(conn, clean_db, kind):
    conn.execute("CREATE TABLE IF NOT EXISTS public.race_effect (job_id bigint, written_by text)")
    conn.execute("TRUNCATE public.race_effect")
    job_id = submit(conn)
    (old_version,) = conn.execute("SELECT lease_version FROM jobs.claim(%s, 'old')", (job_id,)).fetchone()
    conn.execute("UPDATE jobs.job SET lease_expires_at = now() - interval '1 second' WHERE id = %s", (job_id,))
    conn.execute("SELECT * FROM jobs.reap()")
    (new_version,) = conn.execute("SELECT lease_version FROM jobs.claim(%s, 'new')", (job_id,)).fetchone()

    for worker, version in (("old", old_version), ("new", new_version)):
        try:
            with conn.transaction():
                conn.execute("INSERT INTO public.race_effect VALUES (%s, %s)", (job_id, worker))
                conn.execute("SELECT jobs.complete(%s, %s, %s)", (job_id, worker, version))
        except psycopg.Error as exc:
            assert exc.sqlstate == "JB001" and worker == "old"
    assert conn.execute("SELECT written_by FROM public.race_effect").fetchall() == [("new",)]


def test_concurrent_submits_of_one_idempotency_key_create_one_job(conn, clean_db, kind):
    def submit_same(c, i):
        return c.execute(
            "SELECT id FROM jobs.submit('t', %s, idempotency_key => 'order:1')",
            (json.dumps({"attempt": i}),)).fetchone()[0]

    ids = run_together(clean_db, submit_same)
    assert len(set(ids)) == 1
    assert conn.execute("SELECT count(*) FROM jobs.job").fetchone()[0] == 1
    assert conn.execute("SELECT count(*) FROM jobs.history WHERE reason = 'submitted'").fetchone()[0] == 1


def test_concurrent_fan_out_with_one_coordinator_key_creates_one_family(conn, clean_db, kind):
    def fan(c, i):
        return c.execute(
            "SELECT id FROM jobs.fan_out(%s, %s)",
            (json.dumps([{"kind": "t"}] * 3), json.dumps({"kind": "t", "idempotency_key": "report:7"}))).fetchone()[0]

    ids = run_together(clean_db, fan)
    assert len(set(ids)) == 1
    assert conn.execute("SELECT count(*) FROM jobs.job").fetchone()[0] == 4


def test_children_finishing_at_once_wake_the_coordinator_exactly_once(conn, clean_db, kind):
    for _ in range(5):
        conn.execute("TRUNCATE jobs.event, jobs.job RESTART IDENTITY CASCADE")
        coordinator = conn.execute(
            "SELECT id FROM jobs.fan_out(%s, '{\"kind\": \"t\"}')",
            (json.dumps([{"kind": "t"}] * THREADS),)).fetchone()[0]
        leases = conn.execute("SELECT job_id, lease_version FROM jobs.claim_next('w', NULL, 100)").fetchall()
        assert len(leases) == THREADS and coordinator not in [lease[0] for lease in leases]

        def finish(c, i):
            job_id, version = leases[i]
            if i % 2:
                return c.execute("SELECT wake FROM jobs.complete(%s, 'w', %s)", (job_id, version)).fetchone()[0]
            return c.execute("SELECT wake FROM jobs.fail(%s, 'w', %s, 'no', retryable => false)",
                             (job_id, version)).fetchone()[0]

        wakes = [w for w in run_together(clean_db, finish) if w]
        assert wakes == [[coordinator]]
        assert conn.execute("SELECT pending_children FROM jobs.get(%s)", (coordinator,)).fetchone()[0] == 0
        assert conn.execute("SELECT job_id FROM jobs.claim_next('w')").fetchall() == [(coordinator,)]


def test_overlapping_claim_many_batches_do_not_deadlock(conn, clean_db, kind):
    ids = [r[0] for r in conn.execute(
        "SELECT id FROM jobs.submit_many(%s)", (json.dumps([{"kind": "t", "notify": False}] * 200),)).fetchall()]

    def claim_shuffled(c, i):
        # Every worker got every id (duplicate delivery), in its own order.
        order = ids[i:] + ids[:i] if i % 2 else list(reversed(ids))
        got = []
        for start in range(0, len(order), 25):
            got += [r[0] for r in c.execute(
                "SELECT job_id FROM jobs.claim_many(%s, %s)", (order[start:start + 25], f"w{i}")).fetchall()]
        return got

    results = run_together(clean_db, claim_shuffled)
    claimed = Counter(job_id for got in results for job_id in got)
    assert len(claimed) == 200 and set(claimed.values()) == {1}


def test_ordering_key_submits_in_open_transactions_keep_commit_order(conn, clean_db, kind):
    first = psycopg.connect(clean_db)
    second = psycopg.connect(clean_db)
    try:
        first_id = first.execute("SELECT id FROM jobs.submit('t', ordering_key => 'acct:1')").fetchone()[0]
        started = threading.Event()
        box = {}

        def second_submit():
            started.set()
            box["id"] = second.execute("SELECT id FROM jobs.submit('t', ordering_key => 'acct:1')").fetchone()[0]
            second.commit()

        t = threading.Thread(target=second_submit)
        t.start()
        started.wait(5)
        # The second submit waits for the first transaction: it is not done yet.
        poll(lambda: conn.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted").fetchone()[0] == 1)
        assert "id" not in box
        first.commit()
        t.join(10)
        assert box["id"] > first_id
    finally:
        first.close()
        second.close()
    assert conn.execute("SELECT job_id FROM jobs.claim_next('w', NULL, 5)").fetchall() == [(first_id,)]


def test_outbox_notification_is_delivered_only_on_commit(conn, clean_db, kind):
    listener = psycopg.connect(clean_db, autocommit=True)
    try:
        listener.execute("LISTEN jobs_submitted")
        with psycopg.connect(clean_db) as producer:
            producer.execute("SELECT jobs.submit('t')")
            producer.rollback()
            committed = producer.execute("SELECT id FROM jobs.submit('t', '{\"n\": 1}')").fetchone()[0]
            producer.execute("SELECT jobs.submit('t', notify => false)")
            producer.commit()
            batch = [r[0] for r in producer.execute(
                "SELECT id FROM jobs.submit_many(%s)",
                (json.dumps([{"kind": "t"}, {"kind": "t"}, {"kind": "t", "notify": False}]),)).fetchall()]
            producer.commit()
        received = [json.loads(n.payload) for n in listener.notifies(timeout=2, stop_after=2)]
    finally:
        listener.close()
    assert received[0]["id"] == committed and received[0]["queue"] == "default" and "run_after" in received[0]
    assert received[1] == {"queue": "default", "ids": batch[:2]}


def test_submit_many_splits_notifications_under_the_size_limit(conn, clean_db, kind):
    listener = psycopg.connect(clean_db, autocommit=True)
    try:
        listener.execute("LISTEN jobs_submitted")
        ids = [r[0] for r in conn.execute(
            "SELECT id FROM jobs.submit_many(%s)", (json.dumps([{"kind": "t"}] * 1000),)).fetchall()]
        payloads = [n.payload for n in listener.notifies(timeout=2, stop_after=4)]
    finally:
        listener.close()
    assert all(len(p.encode()) < 8000 for p in payloads)
    assert [i for p in payloads for i in json.loads(p)["ids"]] == ids


def test_bad_input_raises_its_documented_sqlstate_and_changes_nothing(conn, clean_db, kind):
    before = conn.execute("SELECT count(*) FROM jobs.job").fetchone()[0]
    cases = [
        ("SELECT jobs.submit('missing')", "JB005"),
        ("SELECT jobs.submit('t', '[1, 2]')", "22023"),
        ("SELECT jobs.submit_many('[{\"kind\": \"t\"}, {\"kind\": \"t\", \"oops\": 1}]')", "22023"),
        ("SELECT * FROM jobs.claim(1, '')", "22023"),
        ("SELECT jobs.complete(424242, 'w', 1)", "JB002"),
        ("SELECT jobs.replay(424242)", "JB002"),
    ]
    for sql, state in cases:
        with pytest.raises(psycopg.Error) as exc:
            conn.execute(sql)
        assert exc.value.sqlstate == state, sql
        assert exc.value.diag.message_hint, f"{sql}: no HINT"
    assert conn.execute("SELECT count(*) FROM jobs.job").fetchone()[0] == before
    assert isinstance(errors.lookup("22023")(), psycopg.Error)


def test_claim_next_never_waits_on_a_row_another_session_holds(conn, clean_db, kind):
    """A claim held open in a transaction locks its row: a second claim_next must skip it and
    take the next job at once (SKIP LOCKED), not wait for the first to commit."""
    first = submit(conn)
    second = submit(conn)
    with psycopg.connect(clean_db) as holder, psycopg.connect(clean_db, autocommit=True) as other:
        held = holder.execute("SELECT job_id FROM jobs.claim(%s, 'holder')", (first,)).fetchall()
        assert [r[0] for r in held] == [first]  # row locked until holder commits
        # A wait would end in 55P03 (lock_not_available) instead of an answer.
        other.execute("SET lock_timeout = '200ms'")
        got = other.execute("SELECT job_id FROM jobs.claim_next('other', ARRAY['default'], 1)").fetchall()
        assert [r[0] for r in got] == [second]
        holder.rollback()


def test_submits_with_ordering_keys_in_opposite_orders_never_deadlock(conn, clean_db, kind):
    """Each batch locks its ordering keys in sorted order, whatever order its specs name them:
    batches naming [r1, r2] and [r2, r1] at once wait for each other instead of deadlocking."""
    def batch(c, i):
        keys = ["r1", "r2", "r3"] if i % 2 else ["r3", "r2", "r1"]
        specs = json.dumps([{"kind": kind, "ordering_key": k} for k in keys])
        outcomes = []
        for _ in range(3):
            try:
                with c.transaction():
                    c.execute("SELECT count(*) FROM jobs.submit_many(%s::jsonb)", (specs,))
                    # Hold the keys a moment, as a producer's own transaction would.
                    c.execute("SELECT pg_sleep(0.01)")
                outcomes.append("ok")
            except errors.DeadlockDetected:
                outcomes.append("deadlock")
        return outcomes

    results = [o for per in run_together(clean_db, batch) for o in per]
    assert results.count("deadlock") == 0
    assert conn.execute("SELECT count(*) FROM jobs.job").fetchone()[0] == THREADS * 3 * 3


def test_an_open_transaction_that_tallied_holds_up_no_other_session(conn, clean_db, kind):
    """Every transition adds to a per-minute rollup row, locked until its transaction ends.
    An outbox producer submits inside its own transaction and may go on working for a while:
    its row must be nobody else's, or the sessions sharing it would queue behind it (they did:
    the row was one of four per minute and kind, picked by pid modulo 4)."""
    queued = [submit(conn) for _ in range(3)]
    with psycopg.connect(clean_db) as producer:
        submit(producer)  # tallied, not committed: the producer works on
        pid = producer.execute("SELECT pg_backend_pid()").fetchone()[0]
        others = []
        try:
            # Sessions whose pids met the producer's modulo 4 shared its row: take the first
            # one that would have (new connections until one does), and some that would not.
            while not any(p % 4 == pid % 4 for _, p in others) or len(others) < 3:
                c = psycopg.connect(clean_db, autocommit=True)
                others.append((c, c.execute("SELECT pg_backend_pid()").fetchone()[0]))
                assert len(others) < 40, "no session with the producer's pid modulo 4"
            for (c, _), job_id in zip(sorted(others, key=lambda o: o[1] % 4 != pid % 4), queued):
                # A wait would end in 55P03 (lock_not_available) instead of an answer.
                c.execute("SET lock_timeout = '500ms'")
                lease = c.execute("SELECT job_id, lease_version FROM jobs.claim(%s, 'w')", (job_id,)).fetchone()
                assert lease == (job_id, 1)
                assert c.execute("SELECT accepted FROM jobs.complete(%s, 'w', 1)", (job_id,)).fetchone()[0]
        finally:
            for c, _ in others:
                c.close()
        producer.rollback()
    assert conn.execute("SELECT count(*) FROM jobs.job WHERE status = 'done'").fetchone()[0] == 3
