"""Property test of the SQL state machine: random interleavings of every jobs.* call,
including stale workers, duplicate claims, expiries, cancels and replays, must keep the
invariants of the design contract (§8) true after every step."""

from __future__ import annotations

import json

import psycopg
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

EXPECTED_FAILURES = {"JB001", "JB003"}


@pytest.fixture
def machine_db(clean_db):
    with psycopg.connect(clean_db, autocommit=True) as c:
        c.execute("SELECT jobs.define_type('p', max_retries => 2)")
    return clean_db


def transition_table(conn):
    """The legal transitions as the database states them (jobs.transitions): the (from, to)
    pairs each reason may log, and the reasons that bump lease_version by one."""
    legal: dict[str, set] = {}
    bumps = set()
    for reason, src, dst, bump in conn.execute(
            "SELECT reason, from_status::text, to_status::text, bumps_lease_version FROM jobs.transitions()"):
        legal.setdefault(reason, set()).add((src, dst))
        if bump:
            bumps.add(reason)
    return legal, bumps


def check_invariants(conn):
    legal, bumps = transition_table(conn)
    events = conn.execute(
        "SELECT job_id, from_status::text, to_status::text, lease_version, reason FROM jobs.history ORDER BY job_id, id"
    ).fetchall()
    jobs = {r[0]: r[1:] for r in conn.execute(
        "SELECT id, status::text, lease_version, pending_children FROM jobs.job").fetchall()}
    last = {}
    completions = {}
    for job_id, src, dst, version, reason in events:
        assert (src, dst) in legal[reason], (job_id, src, dst, reason)
        previous = last.get(job_id)
        if previous is None:
            assert reason == "submitted" and version == 0, (job_id, reason)
        else:
            assert src == previous[0], f"job {job_id}: {reason} from {src} but it was {previous[0]}"
            step = 1 if reason in bumps else 0
            assert version == previous[1] + step, (job_id, reason, previous[1], version)
        last[job_id] = (dst, version)
        if reason == "completed":
            completions[job_id] = completions.get(job_id, 0) + 1
    assert set(last) == set(jobs), "every job has a history and every history a job"
    for job_id, (status, version, _pending) in jobs.items():
        assert last[job_id] == (status, version), (job_id, last[job_id], status, version)
    assert all(n == 1 for n in completions.values())
    # pending_children counts unfinished children exactly.
    counts = dict(conn.execute(
        "SELECT p.id, count(c.id) FILTER (WHERE c.status NOT IN ('done', 'failed')) "
        "FROM jobs.job p LEFT JOIN jobs.job c ON c.parent_id = p.id GROUP BY p.id").fetchall())
    for job_id, (_status, _version, pending) in jobs.items():
        assert pending == counts.get(job_id, 0), (job_id, pending, counts.get(job_id))


class JobsMachine(RuleBasedStateMachine):
    database_url: str

    @initialize()
    def connect(self):
        self.conn = psycopg.connect(self.database_url, autocommit=True)
        self.conn.execute("TRUNCATE jobs.event, jobs.job RESTART IDENTITY CASCADE")
        self.leases = []  # (job_id, worker, lease_version), current or stale

    def teardown(self):
        self.conn.close()

    def call(self, sql, params=()):
        try:
            return self.conn.execute(sql, params).fetchall()
        except psycopg.Error as exc:
            assert exc.sqlstate in EXPECTED_FAILURES, f"{sql} {params}: {exc.sqlstate} {exc}"
            return None

    def job_ids(self):
        return [r[0] for r in self.conn.execute("SELECT id FROM jobs.job ORDER BY id").fetchall()]

    @rule(key=st.sampled_from([None, "a", "b"]), idem=st.sampled_from([None, "x", "y", "z"]),
          delayed=st.booleans())
    def submit(self, key, idem, delayed):
        self.call("SELECT jobs.submit('p', '{}', %s, CASE WHEN %s THEN now() + interval '1 hour' END, %s)",
                  (idem, delayed, key))

    @rule(n=st.integers(0, 3), key=st.sampled_from([None, "f1", "f2"]))
    def fan_out(self, n, key):
        self.call("SELECT jobs.fan_out(%s, %s)",
                  (json.dumps([{"kind": "p"}] * n), json.dumps({"kind": "p", "idempotency_key": key})))

    @rule(pick=st.integers(0, 50), worker=st.sampled_from(["w1", "w2"]))
    def claim(self, pick, worker):
        ids = self.job_ids()
        if ids:
            rows = self.call("SELECT job_id, lease_version FROM jobs.claim(%s, %s)", (ids[pick % len(ids)], worker))
            self.leases += [(r[0], worker, r[1]) for r in rows or []]

    @rule(worker=st.sampled_from(["w1", "w2"]), n=st.integers(1, 3))
    def claim_next(self, worker, n):
        rows = self.call("SELECT job_id, lease_version FROM jobs.claim_next(%s, NULL, %s)", (worker, n))
        self.leases += [(r[0], worker, r[1]) for r in rows or []]

    @rule(pick=st.integers(0, 50), how=st.sampled_from(["complete", "retry", "fatal", "heartbeat", "many"]))
    def use_lease(self, pick, how):
        if not self.leases:
            return
        job_id, worker, version = self.leases[pick % len(self.leases)]
        if how == "complete":
            self.call("SELECT jobs.complete(%s, %s, %s)", (job_id, worker, version))
        elif how == "retry":
            self.call("SELECT jobs.fail(%s, %s, %s, 'boom')", (job_id, worker, version))
        elif how == "fatal":
            self.call("SELECT jobs.fail(%s, %s, %s, 'fatal', false)", (job_id, worker, version))
        elif how == "heartbeat":
            self.call("SELECT jobs.heartbeat(%s, %s, %s)", (job_id, worker, version))
        else:
            self.call("SELECT * FROM jobs.complete_many(%s, %s, %s, NULL)", ([job_id, job_id], worker, [version, version]))

    @rule()
    def expire_and_reap(self):
        self.conn.execute("UPDATE jobs.job SET lease_expires_at = now() - interval '1 second' WHERE status = 'processing'")
        self.call("SELECT * FROM jobs.reap()")

    @rule(pick=st.integers(0, 50))
    def cancel(self, pick):
        ids = self.job_ids()
        if ids:
            self.call("SELECT jobs.cancel(%s)", (ids[pick % len(ids)],))

    @rule(pick=st.integers(0, 50))
    def replay(self, pick):
        ids = self.job_ids()
        if ids:
            self.call("SELECT jobs.replay(%s)", (ids[pick % len(ids)],))

    @rule(pick=st.integers(0, 50))
    def lose_and_recover_signal(self, pick):
        ids = self.job_ids()
        if ids:
            self.call("SELECT jobs.mark_enqueue_failed(%s)", ([ids[pick % len(ids)]],))
            self.call("SELECT * FROM jobs.recover_enqueue_failed()")

    @rule()
    def release_delayed(self):
        self.conn.execute("UPDATE jobs.job SET run_after = now() WHERE status = 'queued' AND run_after > now()")

    @invariant()
    def contract_holds(self):
        if hasattr(self, "conn"):
            check_invariants(self.conn)


def test_random_call_sequences_keep_the_contract(machine_db):
    JobsMachine.database_url = machine_db
    runner = JobsMachine.TestCase()
    runner.settings = settings(max_examples=40, stateful_step_count=40, deadline=None,
                               suppress_health_check=list(HealthCheck))
    runner.runTest()
