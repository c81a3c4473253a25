"""The thin-driver rules, checked: one SQL module of jobs.* calls, typed rows, the error
registry mirrored from docs/errors.md, and producer behaviour against real servers."""

from __future__ import annotations

import re
import time
from datetime import datetime, timedelta, timezone

import psycopg
import pytest
import redis as redis_lib

from jobfence import errors, sql
from jobfence.client import Client
from jobfence.db import Database
from jobfence.relay import parse_notification
from jobfence.rows import Heartbeat, Job, Lease, Outcome, Signal
from jobfence.transport import Transport, delayed_key, ready_key

from conftest import REPO, wait_until

STATEMENTS = {name: value for name, value in vars(sql).items()
              if name.isupper() and isinstance(value, str)}


@pytest.fixture
def db(clean_db):
    d = Database(clean_db, max_size=2, open_timeout=10)
    yield d
    d.close()


# -- sql.py -------------------------------------------------------------------------------
def test_sql_module_calls_only_jobs_functions():
    # now(): the transaction's time, compared with created_at to tell a new row from an
    # idempotent repeat (sql.SUBMIT_CREATED); it reads nothing and writes nothing.
    # generate_series, make_interval: the dashboard's per-minute windows over jobs.metrics.
    # min ... OVER (a window, not a call): a batch's first copy of a repeated key
    # (sql.SUBMIT_MANY_CREATED).
    allowed_builtins = {"unnest", "count", "date_part", "now", "generate_series", "make_interval",
                        "min", "OVER"}
    assert STATEMENTS, "sql.py defines no statement"
    for name, text in STATEMENTS.items():
        upper = text.upper()
        for verb in ("INSERT", "UPDATE", "DELETE", "TRUNCATE", "CREATE", "ALTER", "DROP"):
            assert not re.search(rf"\b{verb}\b", upper), f"{name} writes a table directly"
        # Session plumbing, not data: LISTEN, and a transaction's own settings.
        if text.strip().upper().startswith(("LISTEN", "SET LOCAL", "SET TRANSACTION")):
            continue
        # A name before "(" is a call, but for an alias's column list ("AS w(k)").
        calls = re.findall(r"(?<![Aa][Ss] )\b([A-Za-z_][\w.]*)\s*\(", text)
        # The one relation a driver reads: the observability view granted to jobs_admin.
        reads_view = re.search(r"\bFROM\s+jobs\.queue_depth\b", text) is not None
        assert reads_view or any(c.startswith("jobs.") for c in calls), \
            f"{name} calls no jobs.* function"
        for call in calls:
            assert call.startswith("jobs.") or call in allowed_builtins, \
                f"{name} calls {call}(), which is not a jobs.* function"
        for found in re.finditer(r"\bFROM\s+([A-Za-z_][\w.]*)(\s*\()?", text, re.I):
            if found.group(2) is None:  # a relation, not a function call
                assert found.group(1) == "jobs.queue_depth", f"{name} reads the relation {found.group(1)}"


def test_every_called_function_exists_in_the_deployed_schema(conn):
    called = set()
    for text in STATEMENTS.values():
        called |= set(re.findall(r"jobs\.(\w+)\s*\(", text))
    called.add("define_type")
    deployed = {r[0] for r in conn.execute(
        "SELECT p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
        "WHERE n.nspname = 'jobs'")}
    assert called - deployed == set()


def test_define_type_passes_only_named_options_so_sql_defaults_apply(db):
    row = db.define_type("defaults_kind")
    assert row["lease_timeout"] == timedelta(seconds=15)
    assert row["max_retries"] == 3
    row = db.define_type("short_kind", lease_timeout=2, max_retries=1, queue="q1")
    assert (row["lease_timeout"], row["max_retries"], row["queue"]) == (timedelta(seconds=2), 1, "q1")
    assert row["timeout"] == timedelta(seconds=30)
    with pytest.raises(ValueError):
        sql.define_type({"no_such_option": 1})


# -- errors.py mirrors docs/errors.md -----------------------------------------------------
def _documented_codes() -> dict[str, str]:
    path = REPO / "docs" / "errors.md"
    assert path.exists(), "docs/errors.md is missing: the registry has nothing to match"
    rows = {}
    header = None
    for line in path.read_text().splitlines():
        if not line.strip().startswith("|"):
            header = None if not line.strip() else header
            continue
        cells = [c.strip().strip("`") for c in line.strip().strip("|").split("|")]
        lowered = [c.lower() for c in cells]
        if "code" in lowered and "name" in lowered:
            header = (lowered.index("code"), lowered.index("name"))
            continue
        if header is None or set(cells[0]) <= set("-: "):
            continue
        code, name = cells[header[0]], cells[header[1]]
        if re.fullmatch(r"[0-9A-Z]{5}", code):
            rows[code] = name
    return rows


def test_error_registry_matches_docs_errors_md():
    documented = _documented_codes()
    registry = {code: cls.name for code, cls in errors.REGISTRY.items()}
    assert documented == registry


def test_error_classes_are_distinct_and_named():
    assert len({cls for cls in errors.REGISTRY.values()}) == len(errors.REGISTRY)
    for code, cls in errors.REGISTRY.items():
        assert cls.sqlstate == code and issubclass(cls, errors.JobfenceError)


def test_server_errors_arrive_as_registry_exceptions(db):
    db.define_type("t", max_payload_bytes=64)
    with pytest.raises(errors.JobNotFound) as found:
        db.get(987654)
    assert found.value.sqlstate == "JB002" and found.value.hint
    with pytest.raises(errors.UnknownKind) as unknown:
        db.submit("never_declared")
    # One exception, one message: no chained psycopg error repeating it with PL/pgSQL context.
    import traceback
    shown = "".join(traceback.format_exception(unknown.value))
    assert "direct cause" not in shown and "PL/pgSQL" not in shown, shown
    assert str(unknown.value).startswith("jobs.submit: unknown kind 'never_declared'")
    assert isinstance(unknown.value.server_error, psycopg.Error)
    with pytest.raises(errors.PayloadTooLarge):
        db.submit("t", {"blob": "x" * 200})
    with pytest.raises(errors.InvalidParameter):
        db.claim_many([1], "")
    job = db.submit("t")
    (lease,) = db.claim_many([job.id], "w1")
    with pytest.raises(errors.LeaseLost):
        db.complete(job.id, "w1", lease.lease_version + 1)
    with pytest.raises(errors.IllegalTransition):
        db.replay(job.id)
    # A connection failure is not ours to name: it stays psycopg's, so callers retry.
    bad = Database("postgresql://127.0.0.1:1/nothing", max_size=1, timeout=1.0)
    try:
        with pytest.raises(psycopg.OperationalError):
            bad.get(1)
    finally:
        bad.close()


# -- typed rows ---------------------------------------------------------------------------
def test_rows_are_typed_dataclasses(db):
    db.define_type("t", lease_timeout=5)
    a, b = db.submit_many([{"kind": "t", "payload": {"n": 1}}, {"kind": "t"}])
    assert isinstance(a, Job) and a.status == "queued"
    leases = db.claim_many([a.id, b.id, a.id], "w1")
    assert sorted(l.job_id for l in leases) == [a.id, b.id]
    lease = next(l for l in leases if l.job_id == a.id)
    assert isinstance(lease, Lease) and lease.payload == {"n": 1} and lease.attempt == 1
    beat = db.heartbeat(a.id, "w1", lease.lease_version)
    assert isinstance(beat, Heartbeat) and beat.alive and not beat.cancel_requested
    outcomes = db.complete_many([(l.job_id, l.lease_version, {"n": l.job_id}) for l in leases], "w1")
    assert all(isinstance(o, Outcome) and o.accepted and o.status == "done" for o in outcomes)
    assert db.get(a.id).result == {"n": a.id}
    # A second completion of the same lease is not accepted, and says so per item.
    again = db.complete_many([(a.id, lease.lease_version, None)], "w1")
    assert [o.accepted for o in again] == [False]


def _backend_pid(db: Database) -> int:
    with db.connection() as c:
        return c.execute("SELECT pg_backend_pid()").fetchone()[0]


def _terminate(conn, pid: int) -> None:
    conn.execute("SELECT pg_terminate_backend(%s)", (pid,))
    wait_until(lambda: not conn.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone(),
               10, what=f"backend {pid} gone")


def test_a_busy_connection_is_handed_out_unchecked_and_an_idle_one_checked(db, conn, monkeypatch):
    # The pool tests a connection only when it sat idle: a check is a round trip, and the
    # hot path takes a connection per batch. A busy one that died fails its call (callers
    # retry); an idle one that died is replaced before anyone gets it.
    first = _backend_pid(db)
    # Back in the pool at once, on the caller's thread: no hand-off to the pool's own thread.
    assert db.pool.get_stats()["pool_available"] == 1
    assert _backend_pid(db) == first, "a single caller reuses one connection"
    _terminate(conn, first)
    with pytest.raises(psycopg.OperationalError):
        _backend_pid(db)  # just returned: not checked, so the dead socket shows
    monkeypatch.setattr("jobfence.db._CHECK_AFTER_IDLE_SECONDS", 0.0)
    second = _backend_pid(db)
    _terminate(conn, second)
    assert _backend_pid(db) not in (first, second), "the dead idle connection was replaced"


def test_reap_returns_signals(db):
    db.define_type("t", lease_timeout=0.2, max_retries=1)
    job = db.submit("t")
    db.claim_many([job.id], "w1")
    time.sleep(0.3)  # the lease must really be older than its timeout in server time
    signals = db.reap()
    assert [(s.job_id, s.queue) for s in signals] == [(job.id, "default")]
    assert isinstance(signals[0], Signal)
    assert db.get(job.id).status == "queued"


def test_push_signals_are_the_signals_as_push_tuples(db):
    db.define_type("t", queue="billing", priority=3)
    later = datetime.now(timezone.utc) + timedelta(hours=1)
    due, delayed, claimed = (db.submit("t"), db.submit("t", run_after=later), db.submit("t"))
    db.claim_many([claimed.id], "w1")
    ids = [claimed.id, delayed.id, due.id, 2**62]
    expected = [s.push_tuple() for s in db.signals(ids)]
    assert [(i, q, p) for i, q, _, p in expected] == [(due.id, "billing", 3), (delayed.id, "billing", 3)]
    assert db.push_signals(ids) == expected
    assert db.push_signals([]) == []


# -- producer: commit, then push ----------------------------------------------------------
def test_submit_pushes_the_id_after_commit(client, redis_url):
    r = redis_lib.Redis.from_url(redis_url)
    job_id = client.submit("noop", {"x": 1})
    assert r.lrange(ready_key("default"), 0, -1) == [str(job_id).encode()]
    assert client.get(job_id).status == "queued"
    later = datetime.now(timezone.utc) + timedelta(seconds=60)
    delayed = client.submit("noop", run_after=later)
    score = r.zscore(delayed_key("default"), str(delayed))
    assert score == pytest.approx(later.timestamp(), abs=0.01)
    ids = client.submit_many([("noop", {"n": i}) for i in range(5)])
    assert r.llen(ready_key("default")) == 6 and len(ids) == 5
    r.close()


def test_submit_with_redis_down_parks_the_job_and_returns_its_id(declared):
    with Client(declared, "redis://127.0.0.1:1/0") as offline:
        job_id = offline.submit("noop")
        ids = offline.submit_many([("noop", {}), ("noop", {})])
        assert offline.get(job_id).status == "enqueue_failed"
        assert {offline.get(i).status for i in ids} == {"enqueue_failed"}


def test_a_run_after_postgresql_cannot_read_is_refused_by_every_submit(client, conn):
    # PostgreSQL reads zone offsets of whole seconds within +-15:59:59; a batch sends
    # run_after as text, which the SQL refuses (22023): a single submit, whose datetime
    # would reach the server as a bare instant, refuses the same value before any SQL.
    def at(**offset):
        return datetime(2030, 1, 1, tzinfo=timezone(timedelta(**offset)))

    for when in (at(hours=16), at(hours=-16), at(hours=23, minutes=59),
                 at(hours=5, minutes=30, microseconds=500_000)):
        for submit in (lambda: client.submit("noop", run_after=when),
                       lambda: client.submit("noop", run_after=when, conn=conn),
                       lambda: client.submit_job("noop", run_after=when, idempotency_key="k"),
                       lambda: client.submit_many([{"kind": "noop", "run_after": when}])):
            with pytest.raises(errors.InvalidParameter) as refused:
                submit()
            assert refused.value.sqlstate == "22023"
            assert "run_after" in str(refused.value) and "+-15:59" in refused.value.hint
    assert conn.execute("SELECT count(*) FROM jobs.job").fetchone()[0] == 0
    # The bounds themselves are read.
    for when in (at(hours=15, minutes=59, seconds=59), at(hours=-15, minutes=59, seconds=59)):
        assert client.get(client.submit("noop", run_after=when)).run_after == when
        assert client.get(client.submit_many([{"kind": "noop", "run_after": when}])[0]).run_after == when


def test_idempotent_submit_returns_the_same_job(client):
    a = client.submit("noop", {"v": 1}, idempotency_key="k1")
    b = client.submit("noop", {"v": 2}, idempotency_key="k1")
    assert a == b and client.get(a).payload == {"v": 1}


def test_fan_out_pushes_children_not_the_coordinator(client, redis_url):
    r = redis_lib.Redis.from_url(redis_url)
    coordinator = client.fan_out([("noop", {"i": i}) for i in range(3)], ("noop", {"then": 1}))
    pushed = {int(x) for x in r.lrange(ready_key("default"), 0, -1)}
    children = {c.id for c in client.children(coordinator)}
    assert pushed == children and coordinator not in pushed and len(children) == 3
    r.close()


# -- transport ----------------------------------------------------------------------------
def test_move_due_is_atomic_and_moves_only_due_ids(redis_url):
    t = Transport(redis_url)
    now = time.time()
    t.redis.zadd(delayed_key("q"), {"1": now - 1, "2": now - 0.5, "3": now + 60})
    assert t.move_due("q") == 2
    assert t.move_due("q") == 0
    assert sorted(t.pop(["q"], 10, 0.1)) == [1, 2]
    assert t.redis.zrange(delayed_key("q"), 0, -1) == [b"3"]
    t.close()


def test_pop_returns_up_to_count_in_fifo_order(redis_url):
    t = Transport(redis_url)
    t.push_ids("q", [1, 2, 3])
    assert t.pop(["q"], 2, 0.1) == [1, 2]
    assert t.pop(["other", "q"], 5, 0.1) == [3]
    started = time.monotonic()
    assert t.pop(["q"], 5, 0.2) == []
    assert time.monotonic() - started >= 0.15
    t.close()


def test_relay_parses_both_notification_shapes():
    assert parse_notification('{"id": 7, "queue": "q", "run_after": "2026-01-01T00:00:00+00:00"}') \
        == [(7, "q", datetime(2026, 1, 1, tzinfo=timezone.utc))]
    assert parse_notification('{"queue": "q", "ids": [1, 2]}') == [(1, "q", None), (2, "q", None)]


def test_sql_producer_notification_is_the_documented_shape(conn, declared):
    """The relay's parser against what the SQL really sends on jobs_submitted."""
    listener = psycopg.connect(declared, autocommit=True)
    try:
        listener.execute("LISTEN jobs_submitted")
        conn.execute("SELECT jobs.submit('noop', '{}'::jsonb)")
        conn.execute("""SELECT jobs.submit_many('[{"kind":"noop"},{"kind":"noop"}]'::jsonb)""")
        notes = list(listener.notifies(timeout=2, stop_after=2))
    finally:
        listener.close()
    parsed = [parse_notification(n.payload) for n in notes]
    assert [len(p) for p in parsed] == [1, 2]
    assert all(q == "default" for p in parsed for _, q, _ in p)
