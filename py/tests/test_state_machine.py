"""Model check of the SQL state machine: random interleavings of submit, the three claims,
heartbeat, complete, fail, reap, cancel, replay, lost signals and time passing, by several
workers that keep every lease they were ever granted (stale ones included), are run against
the real functions and, step by step, against a small Python model of docs/sql-api.md
("States and transitions", "Leaving processing: one door"). After every step each row must
be what the model says, and the events the step wrote exactly those the model expects, each
a legal transition of jobs.transitions() chaining from the job's previous state.

test_sql_properties.py checks invariants that need no model (a legal, chained history);
this one also knows what every call must answer and write, so a wrong lease_version bump, a
stale worker accepted, a missed expiry or a lost wake-up fails here.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field

import psycopg
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

# Durations are hours, not seconds: a threshold (an expiry, a due time) is then never within
# real milliseconds of "now", so the time the test itself takes cannot tip a prediction.
# Time passes only when the advance rule says so (see advance), and it keeps every threshold
# at least MARGIN away from the new now.
LEASE = 3600.0          # lease_timeout
TIMEOUT = 9000.0        # timeout: heartbeats never extend a lease past claimed_at + 2.5 h
BASE, CAP = 3600.0, 7200.0
MARGIN = 600.0
KINDS = {"m2": {"queue": "qa", "max_retries": 2}, "m0": {"queue": "qb", "max_retries": 0}}
WORKERS = ("w1", "w2", "w3")
UNFINISHED = ("queued", "processing", "enqueue_failed")
# Row timestamps are compared with the model's within this many real seconds: the model's
# clock ignores the milliseconds the calls take; a wrong duration is off by half an hour.
SLACK = 60.0

# A CI run is one fixed set of examples (derandomize), so a red build is reproducible from
# its log and a green one does not depend on luck; a local run draws new ones each time.
# 20-35 s on a 2-core machine; JOBFENCE_MODEL_EXAMPLES / _STEPS explore more.
IN_CI = os.environ.get("CI") == "true"
EXAMPLES = int(os.environ.get("JOBFENCE_MODEL_EXAMPLES", "50"))
STEPS = int(os.environ.get("JOBFENCE_MODEL_STEPS", "50"))


@dataclass
class Job:
    id: int
    kind: str
    key: str | None
    run_after: tuple  # (model time, step): now()-valued due times of one instant order by step
    status: str = "queued"
    version: int = 0
    retries: int = 0
    owner: str | None = None
    claimed: float | None = None
    expires: float | None = None
    cancel: bool = False
    replayed: bool = False
    written: float = 0.0  # model time of the last write to the row (its updated_at)
    completions: dict = field(default_factory=dict)  # lease_version -> accepted completions

    @property
    def max_retries(self) -> int:
        return KINDS[self.kind]["max_retries"]

    @property
    def queue(self) -> str:
        return KINDS[self.kind]["queue"]


class JobsModel(RuleBasedStateMachine):
    database_url: str

    # -- set-up ------------------------------------------------------------------------------
    def __init__(self):
        super().__init__()
        self.conn = psycopg.connect(self.database_url, autocommit=True)
        # A clean database per example, as conftest's clean_db.
        self.conn.execute("TRUNCATE jobs.event, jobs.job, jobs.job_type, jobs.metric_minute "
                          "RESTART IDENTITY CASCADE")
        # The backoff's jitter is random(): seeded per example, so that replaying a failing
        # example (hypothesis shrinks by replaying) draws the same delays.
        self.conn.execute("SELECT setseed(0.25)")
        for kind, spec in KINDS.items():
            self.conn.execute(
                "SELECT jobs.define_type(%s, queue => %s, max_retries => %s, "
                "lease_timeout => make_interval(secs => %s), timeout => make_interval(secs => %s), "
                "backoff_base => make_interval(secs => %s), backoff_max => make_interval(secs => %s))",
                (kind, spec["queue"], spec["max_retries"], LEASE, TIMEOUT, BASE, CAP))
        # The one source of legality: the table the functions follow, read from SQL.
        self.legal = {}
        for reason, src, dst, bumps in self.conn.execute(
                "SELECT reason, from_status::text, to_status::text, bumps_lease_version FROM jobs.transitions()"):
            self.legal[(reason, src, dst)] = bumps
        self.jobs: dict[int, Job] = {}
        self.keys: dict[tuple, int] = {}          # (kind, idempotency key) -> job id
        self.held = {w: [] for w in WORKERS}      # leases each worker believes it holds
        self.now = 0.0                            # model time: seconds of shift so far
        self.step = 0
        self.expected: list[tuple] = []           # every event the steps so far must have written
        self.versions_seen: dict[int, int] = {}

    def teardown(self):
        conn = getattr(self, "conn", None)
        if conn is None:
            return
        try:
            if sys.exc_info()[0] is not None:
                return  # a step failed already: that is the report, not this epilogue
            # A reaper tick, checked like any step, then the audit over the whole history.
            self.reap()
            self.matches_the_database()
            broken = conn.execute("SELECT check_name, violations, example_job_ids FROM jobs.audit() "
                                  "WHERE violations > 0").fetchall()
            assert not broken, f"jobs.audit found violations: {broken}"
        finally:
            conn.close()

    # -- helpers -----------------------------------------------------------------------------
    def tick(self) -> tuple:
        self.step += 1
        return (self.now, self.step)

    def claimable(self, j: Job) -> bool:
        if j.status != "queued" or j.run_after[0] > self.now:
            return False
        if j.key is None:
            return True
        return not any(o.key == j.key and ((o.id < j.id and o.status in UNFINISHED)
                                           or (o.id > j.id and o.status == "processing"))
                       for o in self.jobs.values())

    def woken_by(self, ended: list[Job]) -> set[int]:
        """jobs.release_dependents for jobs that just ended: the next unfinished job of each
        key, if it was waiting on the one that ended (younger, or replayed) and is now
        claimable."""
        woken = set()
        for j in sorted(ended, key=lambda x: x.id):
            if j.key is None:
                continue
            rest = sorted(o.id for o in self.jobs.values() if o.key == j.key and o.status in UNFINISHED)
            if rest:
                nxt = self.jobs[rest[0]]
                if (nxt.id > j.id or nxt.replayed) and self.claimable(nxt):
                    woken.add(nxt.id)
        return woken

    def log(self, j: Job, src, dst, reason, worker=None):
        j.written = self.now  # every write but a heartbeat's logs an event
        self.expected.append((j.id, src, dst, j.version, worker, reason))

    def pick_job(self, pick: int) -> Job | None:
        if not self.jobs:
            return None
        ids = sorted(self.jobs)
        return self.jobs[ids[pick % len(ids)]]

    def pick_lease(self, pick: int, fresh: bool):
        """A (worker, job_id, lease_version) some worker was granted: one it still holds when
        ``fresh`` and there is one, else any, stale ones included."""
        leases = [(w, *lease) for w in WORKERS for lease in self.held[w]]
        if fresh:
            leases = [lease for lease in leases if self.holds(*lease)] or leases
        return leases[pick % len(leases)]

    def has_leases(self) -> bool:
        return any(self.held.values())

    def holds(self, worker: str, job_id: int, version: int) -> bool:
        j = self.jobs[job_id]
        return j.status == "processing" and j.owner == worker and j.version == version

    def row_text(self, job_id: int) -> str:
        return self.conn.execute("SELECT row_to_json(j)::text FROM jobs.job AS j WHERE j.id = %s",
                                 (job_id,)).fetchone()[0]

    def refused(self, query: str, params: tuple, job_id: int, sqlstate: str):
        """The call must raise ``sqlstate`` and change nothing: the row stays byte for byte
        what it was, and no event is written (the invariant checks expected == [])."""
        before = self.row_text(job_id)
        try:
            self.conn.execute(query, params).fetchall()
        except psycopg.Error as exc:
            assert exc.sqlstate == sqlstate, f"{query} {params}: {exc.sqlstate} {exc}"
        else:
            raise AssertionError(f"{query} {params} was accepted; the model expected {sqlstate}")
        assert self.row_text(job_id) == before, f"refused call changed job {job_id}"

    def end(self, j: Job, reason: str, src: str, worker=None):
        """Any path into done or failed."""
        j.status = "done" if reason == "completed" else "failed"
        j.expires = None
        if reason != "completed":
            j.owner, j.claimed = None, None
        self.log(j, src, j.status, reason, worker)

    # -- producer ----------------------------------------------------------------------------
    SPEC = st.tuples(st.sampled_from(sorted(KINDS)), st.sampled_from([None, None, None, "k1", "k2"]),
                     st.sampled_from([None, None, None, "i1", "i2"]), st.sampled_from([False, False, False, True]))

    @initialize(specs=st.lists(SPEC, min_size=1, max_size=5))
    def some_jobs(self, specs):
        self.submit(specs)

    @rule(specs=st.lists(SPEC, min_size=1, max_size=3))
    def submit(self, specs):
        for kind, key, idem, delayed in specs:
            row = self.conn.execute(
                "SELECT id, status::text, lease_version FROM jobs.submit(%s, '{}', %s, "
                "CASE WHEN %s THEN now() + interval '90 minutes' END, %s)", (kind, idem, delayed, key)).fetchone()
            if idem is not None and (kind, idem) in self.keys:
                # A repeated key returns the existing job unchanged and writes nothing.
                j = self.jobs[self.keys[(kind, idem)]]
                assert (row[0], row[1], row[2]) == (j.id, j.status, j.version)
                continue
            assert row[0] not in self.jobs and (row[1], row[2]) == ("queued", 0)
            at = self.tick()
            j = Job(row[0], kind, key, (self.now + 5400.0, at[1]) if delayed else at)
            self.jobs[j.id] = j
            if idem is not None:
                self.keys[(kind, idem)] = j.id
            self.log(j, None, "queued", "submitted")

    @rule(pick=st.integers(0, 1000), parked=st.booleans())
    def lose_signal_and_recover(self, pick, parked):
        """A producer's push failed: it parks what it just wrote (a queued job written at
        this instant), or names a job that is no longer queued (skipped). An old queued job
        is left to stale_queued instead, so it is not named here."""
        fresh = [j for j in self.jobs.values() if j.status == "queued" and j.written == self.now]
        other = [j for j in self.jobs.values() if j.status != "queued"]
        pool = (fresh or other) if parked else (other or fresh)
        if not pool:
            return
        j = sorted(pool, key=lambda o: o.id)[pick % len(pool)]
        marked = self.conn.execute("SELECT jobs.mark_enqueue_failed(%s)", ([j.id],)).fetchone()[0]
        assert marked == (1 if j.status == "queued" else 0), (j.id, j.status, marked)
        if marked:
            j.status = "enqueue_failed"
            self.log(j, "queued", "enqueue_failed", "enqueue_failed")
        self.matches_the_database()  # the intermediate state is checked too
        signals = self.conn.execute("SELECT job_id FROM jobs.recover_enqueue_failed()").fetchall()
        parked = sorted(o.id for o in self.jobs.values() if o.status == "enqueue_failed")
        assert sorted(s[0] for s in signals) == parked
        for job_id in parked:
            o = self.jobs[job_id]
            o.status = "queued"
            self.log(o, "enqueue_failed", "queued", "recovered")

    # -- claims ------------------------------------------------------------------------------
    def granted(self, worker: str, rows, wanted: list[Job]):
        """Check the leases a claim returned against the jobs the model says it must grant."""
        assert sorted(r[0] for r in rows) == sorted(j.id for j in wanted), \
            f"{worker} was granted {[r[0] for r in rows]}, the model expected {[j.id for j in wanted]}"
        by_id = {r[0]: r for r in rows}
        for j in wanted:
            _, version, attempt, expires_in = by_id[j.id]
            j.status, j.version, j.owner = "processing", j.version + 1, worker
            j.claimed, j.expires = self.now, self.now + min(LEASE, TIMEOUT)
            assert (version, attempt) == (j.version, j.retries + 1), (j.id, version, attempt)
            assert abs(expires_in - min(LEASE, TIMEOUT)) < SLACK, (j.id, expires_in)
            self.held[worker].append((j.id, j.version))
            self.log(j, "queued", "processing", "claimed", worker)

    LEASE_COLUMNS = "job_id, lease_version, attempt, extract(epoch FROM lease_expires_at - now())::float8"

    @rule(worker=st.sampled_from(WORKERS), pick=st.integers(0, 1000),
          choose=st.sampled_from(["claimable", "claimable", "any", "unknown"]))
    def claim(self, worker, pick, choose):
        ready = [j for j in self.jobs.values() if self.claimable(j)]
        unknown = choose == "unknown"
        j = ready[pick % len(ready)] if choose == "claimable" and ready else self.pick_job(pick)
        job_id = (max(self.jobs, default=0) + 1) if unknown or j is None else j.id
        rows = self.conn.execute(f"SELECT {self.LEASE_COLUMNS} FROM jobs.claim(%s, %s)",
                                 (job_id, worker)).fetchall()
        self.granted(worker, rows, [j] if j is not None and not unknown and self.claimable(j) else [])

    @rule(worker=st.sampled_from(WORKERS), picks=st.lists(st.integers(0, 1000), max_size=4))
    def claim_many(self, worker, picks):
        batch = [self.pick_job(p) for p in picks]
        ids = [j.id for j in batch if j is not None]
        # Claimability is judged on the state before the call, for every id at once.
        wanted = {j.id: j for j in batch if j is not None and self.claimable(j)}
        rows = self.conn.execute(f"SELECT {self.LEASE_COLUMNS} FROM jobs.claim_many(%s, %s)",
                                 (ids, worker)).fetchall()
        assert [r[0] for r in rows] == sorted(wanted), "claim_many returns its leases by id"
        self.granted(worker, rows, list(wanted.values()))

    @rule(worker=st.sampled_from(WORKERS), n=st.integers(1, 3),
          queues=st.sampled_from([None, ["qa"], ["qb"], ["qa", "qb"]]))
    def claim_next(self, worker, n, queues):
        candidates = sorted((j for j in self.jobs.values()
                             if self.claimable(j) and (queues is None or j.queue in queues)),
                            key=lambda j: (j.run_after, j.id))
        rows = self.conn.execute(f"SELECT {self.LEASE_COLUMNS} FROM jobs.claim_next(%s, %s, %s)",
                                 (worker, queues, n)).fetchall()
        self.granted(worker, rows, candidates[:n])

    # -- a worker's calls on a lease it holds, or believes it holds ----------------------------
    @precondition(has_leases)
    @rule(pick=st.integers(0, 1000), fresh=st.booleans())
    def heartbeat(self, pick, fresh):
        worker, job_id, version = self.pick_lease(pick, fresh)
        query = ("SELECT h.alive, h.cancel_requested, extract(epoch FROM h.lease_expires_at - now())::float8 "
                 "FROM jobs.heartbeat(%s, %s, %s) AS h")
        if not self.holds(worker, job_id, version):
            self.refused(query, (job_id, worker, version), job_id, "JB001")
            return
        j = self.jobs[job_id]
        alive, cancel, expires_in = self.conn.execute(query, (job_id, worker, version)).fetchone()
        # Extended by lease_timeout, never past claimed_at + timeout, never shortened.
        j.written = self.now
        j.expires = max(j.expires, min(self.now + LEASE, j.claimed + TIMEOUT))
        assert alive == (self.now < j.claimed + TIMEOUT), (job_id, alive)
        assert cancel == j.cancel, (job_id, cancel)
        assert abs(expires_in - (j.expires - self.now)) < SLACK, (job_id, expires_in, j.expires - self.now)

    @precondition(has_leases)
    @rule(pick=st.integers(0, 1000), fresh=st.booleans())
    def complete(self, pick, fresh):
        worker, job_id, version = self.pick_lease(pick, fresh)
        query = "SELECT accepted, status::text, wake FROM jobs.complete(%s, %s, %s, '{\"ok\": true}')"
        if not self.holds(worker, job_id, version):
            self.refused(query, (job_id, worker, version), job_id, "JB001")
            return
        accepted, status, wake = self.conn.execute(query, (job_id, worker, version)).fetchone()
        j = self.jobs[job_id]
        # A cancel request does not stop a completion: the owner finished the work.
        self.end(j, "completed", "processing", worker)
        j.completions[version] = j.completions.get(version, 0) + 1
        assert j.completions[version] == 1, f"job {job_id}: a second accepted completion of lease {version}"
        assert (accepted, status) == (True, "done")
        assert set(wake) == self.woken_by([j]), (job_id, wake)

    @precondition(has_leases)
    @rule(pick=st.integers(0, 1000), fresh=st.booleans(), retryable=st.booleans())
    def fail(self, pick, fresh, retryable):
        worker, job_id, version = self.pick_lease(pick, fresh)
        query = ("SELECT o.accepted, o.status::text, o.wake, extract(epoch FROM o.run_after - now())::float8 "
                 "FROM jobs.fail(%s, %s, %s, 'boom', %s) AS o")
        if not self.holds(worker, job_id, version):
            self.refused(query, (job_id, worker, version, retryable), job_id, "JB001")
            return
        accepted, status, wake, delay = self.conn.execute(query, (job_id, worker, version, retryable)).fetchone()
        j = self.jobs[job_id]
        j.retries += 1
        assert accepted
        if j.cancel:
            self.end(j, "cancelled", "processing", worker)
        elif not retryable:
            self.end(j, "failed", "processing", worker)
        elif j.retries > j.max_retries:
            self.end(j, "exhausted", "processing", worker)
        else:
            # Back to queued after the kind's backoff: d = least(cap, base * 2^(n-1)) after
            # the n-th failure, delay in [d/2, d] (equal jitter).
            d = min(CAP, BASE * 2 ** (j.retries - 1))
            assert d / 2 - 1e-3 <= delay <= d + 1e-3, (job_id, j.retries, delay, d)
            j.status, j.version, j.owner, j.claimed, j.expires = "queued", j.version + 1, None, None, None
            j.run_after = (self.now + delay, self.tick()[1])
            self.log(j, "processing", "queued", "retried", worker)
            assert status == "queued" and list(wake) == []
            return
        assert status == "failed"
        assert set(wake) == self.woken_by([j]), (job_id, wake)

    # -- the reaper and the operators ----------------------------------------------------------
    @rule()
    def reap(self):
        signals = self.conn.execute("SELECT job_id FROM jobs.reap()").fetchall()
        expired = sorted((j for j in self.jobs.values() if j.status == "processing" and j.expires <= self.now),
                         key=lambda j: j.id)
        requeued, ended = set(), []
        at = self.tick()
        for j in expired:
            j.retries += 1
            worker = j.owner
            if j.cancel:
                self.end(j, "cancelled", "processing", worker)
                ended.append(j)
            elif j.retries > j.max_retries:
                self.end(j, "exhausted", "processing", worker)
                ended.append(j)
            elif j.expires >= j.claimed + TIMEOUT:
                # The lease reached its cap: a timeout, a failure that waits for the kind's
                # backoff (the jitter is the database's draw, checked against its bounds).
                j.status, j.version, j.owner, j.claimed, j.expires = "queued", j.version + 1, None, None, None
                delay = self.conn.execute("SELECT extract(epoch FROM run_after - now())::float8 "
                                          "FROM jobs.job WHERE id = %s", (j.id,)).fetchone()[0]
                d = min(CAP, BASE * 2 ** (j.retries - 1))
                assert d / 2 - 1e-3 <= delay <= d + 1e-3, (j.id, j.retries, delay, d)
                j.run_after = (self.now + delay, at[1])
                self.log(j, "processing", "queued", "timed_out", worker)
                requeued.add(j.id)
            else:
                # Heartbeats stopped (a crashed worker): due at once, it already waited out its lease.
                j.status, j.version, j.owner, j.claimed, j.expires = "queued", j.version + 1, None, None, None
                j.run_after = at
                self.log(j, "processing", "queued", "reaped", worker)
                requeued.add(j.id)
        assert {s[0] for s in signals} == requeued | self.woken_by(ended), (signals, requeued)

    @rule(pick=st.integers(0, 1000))
    def cancel(self, pick):
        j = self.pick_job(pick)
        if j is None:
            return
        accepted, status, wake = self.conn.execute(
            "SELECT accepted, status::text, wake FROM jobs.cancel(%s, 'stop')", (j.id,)).fetchone()
        if j.status in ("queued", "enqueue_failed"):
            was = j.status
            self.end(j, "cancelled", was)
            assert (accepted, status) == (True, "failed")
            assert set(wake) == self.woken_by([j]), (j.id, wake)
        elif j.status == "processing":
            if not j.cancel:
                j.cancel = True
                self.log(j, "processing", "processing", "cancel_requested", j.owner)
            assert (accepted, status, list(wake)) == (True, "processing", [])
        else:
            assert (accepted, status) == (False, j.status)

    @rule(pick=st.integers(0, 1000))
    def replay(self, pick):
        j = self.pick_job(pick)
        if j is None:
            return
        query = "SELECT jobs.replay(%s)"
        if j.status in UNFINISHED:
            self.refused(query, (j.id,), j.id, "JB003")
            return
        replayed = self.conn.execute(query, (j.id,)).fetchone()[0]
        if j.status == "done":
            assert replayed is False  # it succeeded already: a no-op
            return
        assert replayed is True
        j.status, j.version, j.retries, j.cancel, j.replayed = "queued", j.version + 1, 0, False, True
        j.run_after = self.tick()
        self.log(j, "failed", "queued", "replayed")

    @rule(hours=st.sampled_from([0.5, 1.02, 2.0, 5.0]))
    def advance(self, hours):
        """Let time pass. The functions read the clock only through now() and compare it
        with the rows' timestamps (and those with each other): moving every stored instant
        back by delta leaves every difference between two stored instants as it was and
        makes each of them delta further in the past, which is exactly what now() moving on
        by delta would do. jobs.event.at is read by no function; it moves along so that the
        history stays in step with the rows (a submission's instant is its row's created_at)."""
        delta = hours * 3600.0
        thresholds = [t for j in self.jobs.values() for t in
                      ([j.expires, j.claimed + TIMEOUT] if j.status == "processing"
                       else [j.run_after[0]] if j.status == "queued" else [])]
        # Never stop within MARGIN of an expiry or a due time: which side of it a call falls
        # on must not depend on how long the calls themselves take.
        while any(abs(self.now + delta - t) < MARGIN for t in thresholds):
            delta += MARGIN * 1.5
        shift = "make_interval(secs => %(d)s)"
        self.conn.execute(
            f"UPDATE jobs.job SET created_at = created_at - {shift}, updated_at = updated_at - {shift}, "
            f"claimed_at = claimed_at - {shift}, finished_at = finished_at - {shift}, "
            f"run_after = run_after - {shift}, due_at = due_at - {shift}, "
            f"lease_expires_at = lease_expires_at - {shift}, "
            f"cancel_requested_at = cancel_requested_at - {shift}", {"d": delta})
        self.conn.execute(f"UPDATE jobs.event SET at = at - {shift}", {"d": delta})
        self.now += delta

    # -- after every step --------------------------------------------------------------------
    @invariant()
    def matches_the_database(self):
        # The whole history, each job's in order (jobs.history: what the job row records and
        # jobs.event's rows; a claim moves from the row into jobs.event when a row of its
        # lease is written, so a history is compared whole, not by the ids read last time).
        events = self.conn.execute(
            "SELECT job_id, from_status::text, to_status::text, lease_version, worker, reason "
            "FROM jobs.history ORDER BY job_id, id").fetchall()
        written = [tuple(e) for e in events]
        expected = sorted(self.expected, key=lambda e: e[0])   # stable: each job's in order
        assert written == expected, f"events written {written}\nthe model expected {expected}"
        for job_id, src, dst, version, _worker, reason in events:
            assert (reason, src, dst) in self.legal, f"job {job_id}: {reason} {src}->{dst} is not in jobs.transitions()"

        rows = self.conn.execute(
            "SELECT id, status::text, lease_version, retry_count, owned_by, cancel_requested_at IS NOT NULL, "
            "extract(epoch FROM lease_expires_at - now())::float8, extract(epoch FROM run_after - now())::float8 "
            "FROM jobs.job ORDER BY id").fetchall()
        assert [r[0] for r in rows] == sorted(self.jobs)
        for job_id, status, version, retries, owner, cancel, expires_in, due_in in rows:
            j = self.jobs[job_id]
            assert (status, version, retries, owner, cancel) == (j.status, j.version, j.retries, j.owner, j.cancel), \
                f"job {job_id}: row {(status, version, retries, owner, cancel)}, model {j}"
            assert version >= self.versions_seen.get(job_id, 0), f"job {job_id}: lease_version went down"
            self.versions_seen[job_id] = version
            if status == "processing":
                assert abs(expires_in - (j.expires - self.now)) < SLACK, (job_id, expires_in, j)
            else:
                assert expires_in is None, (job_id, expires_in)
            if status == "queued":
                assert abs(due_in - (j.run_after[0] - self.now)) < SLACK, (job_id, due_in, j)


def test_the_functions_follow_the_model(clean_db):
    JobsModel.database_url = clean_db
    runner = JobsModel.TestCase()
    runner.settings = settings(max_examples=EXAMPLES, stateful_step_count=STEPS, deadline=None,
                               derandomize=IN_CI, database=None,
                               suppress_health_check=list(HealthCheck))
    runner.runTest()


def test_the_model_reads_the_transition_table_it_checks(conn):
    # The model's notion of legal is jobs.transitions(): every reason it logs must be there,
    # so a transition dropped from the table (or renamed in a function) fails the run.
    legal = {r[0] for r in conn.execute("SELECT reason FROM jobs.transitions()")}
    assert legal >= {"submitted", "claimed", "completed", "retried", "reaped", "exhausted", "failed",
                     "cancel_requested", "cancelled", "replayed", "enqueue_failed", "recovered", "timed_out"}
