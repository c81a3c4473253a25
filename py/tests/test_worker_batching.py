"""The batching worker: claims are bounded by a prefetch budget rather than by idle
handlers, async handlers run many at a time, and the failure modes of issue 7 — a lease
followed from the kind's current definition, a poison result, a locked row starving other
heartbeats, BaseException from a handler, a handler that ignores its timeout — and of
issue 33: a stored payload Python's json cannot decode fails its own job only."""

from __future__ import annotations

import json
import os
import time

import psycopg
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import wait_until
from test_exporter import port_of, scrape

ONE_SECOND_TIMEOUT = {"JOBFENCE_EXAMPLE_TIMEOUT": "1", "JOBFENCE_EXAMPLE_MAX_RETRIES": "0"}


def _reasons(client, job_id):
    return [e.reason for e in client.events(job_id)]


def _terminal(client, ids):
    counts = client.status_counts(ids)
    return counts.get("done", 0) + counts.get("failed", 0) == len(ids)


def test_batch_is_not_capped_by_concurrency(procs, client, conn):
    ids = client.submit_many([{"kind": "noop"}] * 300)
    procs.worker("w1", "--concurrency", "2", "--batch", "100")
    wait_until(lambda: client.status_counts(ids).get("done", 0) == len(ids), 30,
               what="300 noop jobs done")
    # One claim_many grants its leases in one transaction: one claimed_at per round trip.
    claims = conn.execute("SELECT count(DISTINCT claimed_at) FROM jobs.job WHERE id = ANY(%s)",
                          (ids,)).fetchone()[0]
    assert claims <= 10, f"{claims} claim round trips for 300 jobs at --batch 100"


def _held(conn, ids) -> int:
    return conn.execute("SELECT count(*) FROM jobs.job WHERE id = ANY(%s) AND status = 'processing'",
                        (ids,)).fetchone()[0]


def _claim_sizes(conn, ids) -> list[int]:
    return [r[0] for r in conn.execute(
        "SELECT count(*) FROM jobs.job WHERE id = ANY(%s) AND status = 'processing' "
        "GROUP BY claimed_at ORDER BY claimed_at", (ids,))]


def _loop_time(port: int) -> float:
    """The Unix time the worker's claim loop last went round (a pop, a claim, or a wait for a
    free slot), from its metrics."""
    return scrape(port).one("jobfence_worker_last_loop_timestamp_seconds")


def _after_two_rounds(port: int, since: float) -> None:
    """Returns once the claim loop has started a round after ``since`` and then another: any
    claim the first of them made has committed by then."""
    first: list[float] = []
    wait_until(lambda: first.append(_loop_time(port)) or first[-1] > since, 10,
               what="a round of the claim loop")
    wait_until(lambda: _loop_time(port) > first[-1], 10, what="the round after it")


def test_the_next_batch_is_claimed_while_the_one_before_runs(procs, client, conn):
    """With the defaults (32 handlers, batches of 100) the prefetch is 168: right after a batch
    is dispatched the budget still has room for a whole batch, claimed while the first runs,
    so the handlers need not wait out the next claim's round trip."""
    ids = client.submit_many([{"kind": "sleep", "payload": {"seconds": 10}}] * 300)
    w = procs.worker("w1")
    ready = w.find("worker_ready")[0]
    assert (ready["concurrency"], ready["batch"], ready["prefetch"]) == (32, 100, 168), ready
    wait_until(lambda: _held(conn, ids) == 200, 20,
               what="two batches held while the first one's handlers sleep")
    assert _claim_sizes(conn, ids) == [100, 100]


def test_the_claim_budget_is_held_to_the_job(procs, client, conn):
    """concurrency + prefetch jobs at most, exactly: with 32 handlers and a prefetch of 150
    the budget is 182, so a batch of 100 is followed by one of 82, the room left (over half a
    batch, so it is claimed at once). Then nothing more while the handlers sleep, though the
    claim loop keeps going round with 118 ids waiting in Redis."""
    ids = client.submit_many([{"kind": "sleep", "payload": {"seconds": 30}}] * 300)
    w = procs.worker("w1", "--prefetch", "150", "--metrics-port", "0")
    port = port_of(w, "metrics_listening")
    wait_until(lambda: _held(conn, ids) == 182, 20, what="the budget of 182 held")
    full_at = time.time()
    assert _claim_sizes(conn, ids) == [100, 82]
    _after_two_rounds(port, full_at)
    assert _held(conn, ids) == 182
    assert _claim_sizes(conn, ids) == [100, 82]


def test_a_backlog_is_claimed_in_batches_not_in_remainders(procs, client, conn):
    """Claiming whatever sliver of the budget is free would make some round trips carry a
    few jobs; while jobs are in flight the claimer waits for half a batch of room instead."""
    ids = client.submit_many([{"kind": "noop"}] * 1000)
    procs.worker("w1", "--batch", "100")
    wait_until(lambda: client.status_counts(ids).get("done", 0) == len(ids), 60,
               what="1,000 noop jobs done")
    sizes = [r[0] for r in conn.execute(
        "SELECT count(*) FROM jobs.job WHERE id = ANY(%s) GROUP BY claimed_at ORDER BY claimed_at",
        (ids,))]
    # The backlog was all there from the start: only the drain's last claim may be short.
    assert min(sizes[:-1]) >= 50, sizes
    assert len(sizes) <= 15, sizes


def test_async_handlers_run_many_at_once_on_one_worker(procs, client):
    ids = client.submit_many([{"kind": "asleep", "payload": {"seconds": 1}}] * 50)
    procs.worker("w1", "--concurrency", "50", "--batch", "100")
    wait_until(lambda: _terminal(client, ids), 30, what="50 async jobs terminal")
    jobs = [client.get(i) for i in ids]
    assert {j.status for j in jobs} == {"done"}
    # Each handler counts the tasks alive on its event loop when its sleep ends; the first
    # to wake sees all of its batch-mates still in flight.
    assert max(j.result["peers"] for j in jobs) >= 50


def test_heartbeat_follows_the_lease_held_not_the_kinds_current_definition(procs, client):
    # Submitted under a 2 s lease; the worker's app then declares 30 s. Beating every 10 s
    # (30 / 3) would let the reaper take the 2 s lease the job actually holds.
    procs.reaper()
    job_id = client.submit("sleep", {"seconds": 4})
    w = procs.worker("w1", env={"JOBFENCE_EXAMPLE_LEASE_TIMEOUT": "30"})
    job = client.wait(job_id, timeout=25)
    assert job.status == "done"
    assert _reasons(client, job_id) == ["submitted", "claimed", "completed"]
    assert not w.find("heartbeat_lost")


def test_poison_results_fail_their_own_job_and_nothing_else(procs, client):
    # One claim batch mixing good results with three that jsonb refuses: NaN and NUL are
    # caught before the report, a lone surrogate only by PostgreSQL (complete_many refuses
    # the batch, which is then completed item by item).
    specs = ([{"kind": "noop", "payload": {"n": n}} for n in range(5)]
             + [{"kind": "poison", "payload": {"mode": m}} for m in ("nan", "nul", "surrogate")]
             + [{"kind": "noop", "payload": {"n": n}} for n in range(5, 10)])
    ids = client.submit_many(specs)
    good, poison = ids[:5] + ids[8:], ids[5:8]
    w = procs.worker("w1")
    wait_until(lambda: _terminal(client, ids), 20, what="poison batch terminal")
    assert {client.get(i).status for i in good} == {"done"}
    for job_id in poison:
        job = client.get(job_id)
        assert job.status == "failed" and "result rejected" in job.error, job
        assert _reasons(client, job_id) == ["submitted", "claimed", "failed"]  # no retry
    # The reporter survived: later jobs still complete.
    later = client.submit_many([{"kind": "noop"}] * 20)
    wait_until(lambda: client.status_counts(later).get("done", 0) == 20, 20,
               what="later jobs done")
    assert w.alive()
    assert len(w.find("result_rejected")) >= 3


def test_a_payload_python_cannot_decode_fails_alone_and_its_batch_mates_run(procs, client, conn):
    # jobs.submit refuses 1e5000 now (22003); a row written before that, or by a superuser,
    # still holds it, as 5001 digits: over Python's limit for integers.
    ids = client.submit_many([{"kind": "noop", "payload": {"n": n}} for n in range(21)])
    bad, good = ids[10], ids[:10] + ids[11:]
    conn.execute("""UPDATE jobs.job SET payload = '{"x": 1e5000}' WHERE id = %s""", (bad,))
    procs.reaper()
    w = procs.worker("w1", "--concurrency", "25", "--batch", "50")
    wait_until(lambda: _terminal(client, ids), 30, what="the batch of 21 terminal")
    # All 21 in one claim: the poisoned row shared its batch with the others.
    claims = conn.execute("SELECT count(DISTINCT claimed_at) FROM jobs.job WHERE id = ANY(%s)",
                          (ids,)).fetchone()[0]
    assert claims == 1, f"{claims} claims for one batch of 21"
    assert {client.get(i).status for i in good} == {"done"}
    assert {tuple(_reasons(client, i)) for i in good} == {("submitted", "claimed", "completed")}
    job = client.get(bad)
    assert job.status == "failed", job
    assert job.error.startswith("payload cannot be decoded: "), job.error
    assert "5001 digits" in job.error and "sys.set_int_max_str_digits" not in job.error
    # Failed at once, fatally: no retry, never left to the reaper.
    assert _reasons(client, bad) == ["submitted", "claimed", "failed"]
    assert job.payload.startswith('{"x": 1000') and len(job.payload) > 5000
    assert not w.find("worker_error") and not w.find("signals_dropped")
    assert w.alive()


def test_a_row_locked_elsewhere_does_not_starve_the_other_heartbeats(procs, client, declared):
    w = procs.worker("w1")
    procs.reaper()
    x = client.submit("sleep", {"seconds": 30})
    y = client.submit("sleep", {"seconds": 4})  # two lease lengths (2 s): needs heartbeats
    wait_until(lambda: client.status_counts([x, y]).get("processing", 0) == 2, 10,
               what="both jobs running")
    with psycopg.connect(declared) as locker:
        locker.execute("SELECT 1 FROM jobs.job WHERE id = %s FOR UPDATE", (x,))
        wait_until(lambda: client.get(y).status in ("done", "failed"), 25,
                   what="y terminal while x is locked")
        locker.rollback()
    assert client.get(y).status == "done"
    assert _reasons(client, y) == ["submitted", "claimed", "completed"]
    client.cancel(x)
    assert w.alive()


def test_base_exceptions_from_handlers_fail_the_job_with_the_real_error(procs, client):
    w = procs.worker("w1")
    ids = {name: client.submit("raise_base", {"exc": name})
           for name in ("SystemExit", "KeyboardInterrupt", "BaseException")}
    for name, job_id in ids.items():
        job = client.wait(job_id, timeout=20)
        assert job.status == "failed" and job.error.startswith(name), job
        assert "timeout" not in _reasons(client, job_id)
        assert w.find("handler_crashed", job_id=job_id)
    after = client.submit("noop")
    assert client.wait(after, timeout=15).status == "done"
    assert w.alive()


def test_a_hung_sync_handler_gives_its_slot_to_a_replacement_thread(procs, client):
    w = procs.worker("w1", "--concurrency", "1", env=ONE_SECOND_TIMEOUT)
    hung = client.submit("hang", {"seconds": 120})
    wait_until(lambda: client.get(hung).status == "processing", 10, what="hang running")
    later = [client.submit("noop", {"n": n}) for n in range(3)]
    for job_id in later:
        assert client.wait(job_id, timeout=20).status == "done"
    job = client.get(hung)
    assert job.status == "failed" and job.error == "timeout"
    line = w.wait_for("handler_hung", job_id=hung)[0]
    assert line["level"] == "warning" and line["hung"] == 1
    assert w.alive()


def test_a_process_handler_that_ignores_its_timeout_is_killed(procs, client):
    w = procs.worker("w1", "--processes", "1", env=ONE_SECOND_TIMEOUT)
    hung = client.submit("hang_process", {"seconds": 120})
    job = client.wait(hung, timeout=20)
    assert job.status == "failed" and job.error == "timeout"
    killed = w.wait_for("process_killed", job_id=hung)[0]
    assert killed["reason"] == "timeout"
    try:
        os.kill(killed["pid"], 0)
        alive = True
    except ProcessLookupError:
        alive = False
    assert not alive, "the handler process must be gone"
    # A fresh child serves the next process job, and thread kinds never stopped.
    wait_until(lambda: [e for e in w.find("process_ready") if e["pid"] != killed["pid"]],
               20, what="the replacement handler process")
    after = client.submit("hang_process", {"seconds": 0})
    done = client.wait(after, timeout=20)
    assert done.status == "done" and done.result["pid"] != killed["pid"]
    assert client.wait(client.submit("noop"), timeout=15).status == "done"
    assert w.alive()


def test_a_process_handler_that_reports_progress_often_is_still_killed_at_its_timeout(procs, client):
    # A report every 5 ms: the worker serves each one and still checks the job's deadline.
    w = procs.worker("w1", "--processes", "1", env=ONE_SECOND_TIMEOUT)
    # A first job boots the handler process, so the timed one starts reporting at once. On
    # a busy machine the boot alone may outlast the one-second timeout (it runs from the
    # claim): then a second job, on the booted process, must be done.
    warm = client.wait(client.submit("steps_process", {"steps": 2, "seconds": 0}), timeout=20)
    if warm.status != "done":
        # The slow boot's job was killed at its timeout: wait for a process that is up.
        wait_until(lambda: len(w.find("process_ready")) > len(w.find("process_killed")), 20,
                   what="a booted handler process")
        assert client.wait(client.submit("steps_process", {"steps": 2, "seconds": 0}),
                           timeout=20).status == "done"
    busy = client.submit("steps_process", {"steps": 100_000, "seconds": 0.005})
    job = client.wait(busy, timeout=20)
    assert job.status == "failed" and job.error == "timeout"
    assert 0 < job.progress["done"] < 100_000
    killed = w.wait_for("process_killed", job_id=busy)[0]
    assert killed["reason"] == "timeout"
    # The timeout runs from the claim: a job claimed while the replacement still boots could
    # spend its one second waiting for it, so the next job goes in once the child is ready.
    wait_until(lambda: [e for e in w.find("process_ready") if e["pid"] != killed["pid"]],
               20, what="the replacement handler process")
    assert client.wait(client.submit("steps_process", {"steps": 2, "seconds": 0}),
                       timeout=20).status == "done"


def test_claimed_jobs_waiting_for_a_handler_keep_their_leases(procs, client):
    # Both jobs come in one claim; with one handler the second waits ~3 s — longer than
    # its 2 s lease — and must be heartbeated meanwhile, not reaped.
    ids = client.submit_many([{"kind": "sleep", "payload": {"seconds": 3}}] * 2)
    procs.reaper()
    w = procs.worker("w1", "--concurrency", "1", "--batch", "10")
    wait_until(lambda: client.status_counts(ids).get("done", 0) == 2, 30, what="both done")
    for job_id in ids:
        assert _reasons(client, job_id) == ["submitted", "claimed", "completed"]
    claimed = [client.get(i).claimed_at for i in ids]
    assert claimed[0] == claimed[1], "one claim round trip for both"
    assert not w.find("heartbeat_lost")


def test_a_result_is_sent_as_the_text_its_check_encoded(conn):
    # The worker checks a result with one strict dump and sends that text: no second
    # encoding. A None result is SQL NULL, not the jsonb 'null'.
    from jobfence.worker.common import encode_result

    problem, sendable = encode_result({"ok": True, "n": [1, 2.5, "é"]})
    assert problem is None
    assert conn.execute("SELECT %s::jsonb", (sendable,)).fetchone()[0] == {"ok": True, "n": [1, 2.5, "é"]}
    assert encode_result(None) == (None, None)
    assert encode_result(float("nan"))[0].startswith("result is not JSON")
    assert "NUL" in encode_result({"s": "a\x00b"})[0]


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20)


@settings(max_examples=300, deadline=None)
@given(value=JSON_VALUES)
def test_the_worker_encodes_and_decodes_json_as_the_json_module_does(value):
    # The worker's result encoder is built once and the drivers' reader tries the C scanner
    # first (docs/performance.md, "What the worker decodes and encodes per job"): both must
    # give exactly what the json module gives, whitespace around a json column included.
    from jobfence.jsonload import loads
    from jobfence.worker.common import _STRICT_JSON, encode_result

    problem, sendable = encode_result(value)
    if value is None:
        assert (problem, sendable) == (None, None)
        return
    expected = _STRICT_JSON.encode(value)
    if "\\u0000" in expected:
        return  # the NUL rule, tested above
    assert problem is None and sendable.obj == expected
    for text in (expected, f" {expected}\n"):
        assert loads(text.encode()) == json.loads(text)
        assert loads(text) == json.loads(text)


def test_json_that_python_refuses_is_read_as_undecoded_text():
    from jobfence.jsonload import UndecodedJson, loads
    from jobfence.worker.common import encode_result

    a: list = []
    a.append(a)
    assert encode_result(a)[0].startswith("result is not JSON: RecursionError")
    assert encode_result({"x": object()})[0].startswith("result is not JSON: TypeError")
    for text, reason in ((b'{"a": 1}x', "Extra data"), (b"", "Expecting value"),
                         (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
                         (b'{"n": ' + b"9" * 5000 + b"}", "4300 digits")):
        found = loads(text)
        assert isinstance(found, UndecodedJson) and reason in found.reason, found.reason
    assert loads(b"\xef\xbb\xbf{}") == {}  # a byte order mark: json.loads reads it, so do we


def test_a_completion_answers_only_what_is_not_plain_done(declared, client):
    # complete_many answers one outcome per item; the worker asks only for the ones that say
    # more than "accepted, done, nothing woken", by position. A refused item (a wrong token)
    # and one that woke a dependent come back; the plain completions do not, and stand
    # for themselves (COMPLETED).
    import uuid
    from dataclasses import replace

    from jobfence.worker.leasedb import COMPLETED, LeaseDatabase

    first = client.submit("noop", {})
    dependent = client.submit("noop", {}, depends_on=[first])
    plain = [client.submit("noop", {}) for _ in range(3)]
    db = LeaseDatabase(declared, max_size=1, open_timeout=10)
    try:
        leases = {lease.job_id: lease for lease in db.claim_leases([first, *plain], "w-sparse")}
        forged = replace(leases[plain[1]], token=uuid.uuid4())
        items = [(leases[plain[0]], None), (leases[first], {"ok": 1}), (forged, None), (leases[plain[2]], None)]
        unusual = db.complete_leases(items, "w-sparse")
        assert sorted(unusual) == [1, 2]
        assert unusual[1].job_id == first and unusual[1].accepted and unusual[1].wake == [dependent]
        assert unusual[2].job_id == plain[1] and not unusual[2].accepted
        assert client.status_counts([plain[0], plain[2], first]) == {"done": 3}
        assert client.status_counts([plain[1]]) == {"processing": 1}
        assert COMPLETED.accepted and COMPLETED.status == "done" and not COMPLETED.wake
    finally:
        db.close()


def test_a_worker_process_freezes_what_it_started_with():
    # jobfence worker settles the collector once its app is loaded: the start-up objects
    # frozen out of the cyclic collector's walks and a young generation of 10,000.
    import subprocess
    import sys

    probe = ("import gc; from jobfence.worker.core import settle_collector; "
             "before = gc.get_freeze_count(); settle_collector(); "
             "print(before, gc.get_freeze_count() > 1000, gc.get_threshold())")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.split(maxsplit=1) == ["0", "True (10000, 20, 20)\n"]


def test_ctx_log_lines_carry_the_job_and_are_built_only_when_used():
    # ctx.log is made on first use (most handlers never log), and each line carries the
    # job's id, lease version, worker and kind beside the handler's own fields.
    import logging
    from datetime import datetime, timezone

    from jobfence.app import Context
    from jobfence.rows import Lease

    at = datetime.now(timezone.utc)
    lease = Lease(41, 3, "noop", "default", {}, 2, at, at)
    records = []
    logger = logging.getLogger("jobfence.task.test-ctx-log")
    handler = logging.Handler()
    handler.emit = records.append
    logger.addHandler(handler)
    try:
        ctx = Context(lease, "w-log", logger)
        assert ctx._log is None
        ctx.log.warning("hello", extra={"fields": {"step": "load"}})
        assert ctx.log is ctx._log
    finally:
        logger.removeHandler(handler)
    assert [r.getMessage() for r in records] == ["hello"]
    assert records[0].fields == {"job_id": 41, "lease_version": 3, "worker": "w-log",
                                 "kind": "noop", "step": "load"}


def test_typed_rows_are_built_by_position_or_by_name(conn):
    # The columns in the class's order are taken by position; any other order by name.
    from jobfence import rows

    in_order = conn.cursor(row_factory=rows.OUTCOME).execute(
        "SELECT 7::bigint AS job_id, true AS accepted, 'done' AS status, NULL::timestamptz AS run_after, "
        "'{8}'::bigint[] AS wake").fetchone()
    shuffled = conn.cursor(row_factory=rows.OUTCOME).execute(
        "SELECT '{8}'::bigint[] AS wake, 'done' AS status, true AS accepted, 7::bigint AS job_id, "
        "NULL::timestamptz AS run_after").fetchone()
    assert in_order == shuffled == rows.Outcome(7, True, "done", None, [8])


def test_a_batch_converts_each_distinct_lease_instant_to_the_monotonic_clock():
    # The leases of one claim usually share their instants; a lease of another kind (other
    # timeouts) in the same batch gets its own deadline, not its neighbour's.
    from datetime import datetime, timedelta, timezone

    from jobfence.rows import Lease
    from jobfence.worker.common import LeaseClock

    clock = LeaseClock()
    at = datetime.fromtimestamp(clock.wall, timezone.utc)

    def lease(expires_in, timeout_in):
        return Lease(1, 1, "k", "q", {}, 1, at + timedelta(seconds=expires_in), at + timedelta(seconds=timeout_in))

    first = clock.of(lease(30, 60))
    assert first == clock.of(lease(30, 60))
    assert abs(first[0] - (clock.now + 60)) < 0.01 and abs(first[1] - 10) < 0.01
    other = clock.of(lease(3, 6))
    assert abs(other[0] - (clock.now + 6)) < 0.01 and abs(other[1] - 1) < 0.01
    assert clock.of(lease(0.1, 6))[1] == 0.1  # a beat at least every 0.1 s
