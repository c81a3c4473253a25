"""The SQL path alone: jobs.submit_many → jobs.claim_many (the ids) or jobs.claim_next →
jobs.complete_many, from 2 psycopg connections, no Redis, no handlers.

Two shapes per batch size:
- "calls": one round trip per call, each timed (the per-call ms);
- "pipelined": one round trip per round carrying the submit of batch k, the claim of batch
  k-1 and the completion of batch k-2, each still its own transaction (an explicit BEGIN …
  COMMIT around each: a pipeline's statements would otherwise share one implicit
  transaction and one commit, which no worker does)."""

from __future__ import annotations

import json
import threading
import time

from .common import Counters, Settings, connect, figure, progress, reset

SUBMIT = "SELECT id FROM jobs.submit_many(%s::jsonb)"
# The token forms, as the Python worker calls them: every lease write presents the lease
# token its claim returned (docs/security.md).
# The id, lease_version and token arrays travel in binary, as the drivers send them
# (jobfence.sql): a text array would be printed here and parsed again by the server.
CLAIM_MANY = "SELECT job_id, lease_version, token FROM jobs.claim_many_with_token(%b::bigint[], %s)"
CLAIM_NEXT = "SELECT job_id, lease_version, token FROM jobs.claim_next_with_token(%s, ARRAY['default'], %s)"
COMPLETE = ("SELECT count(*) FILTER (WHERE accepted) FROM jobs.complete_many(%b::bigint[], %s, %b::bigint[], "
            "%s::jsonb[], %b::uuid[])")
CONNECTIONS = 2


def specs_json(n: int, keys: str | None = None) -> str:
    specs = []
    for i in range(n):
        spec = {"kind": "bench", "payload": {"n": i}, "notify": False}
        if keys:
            spec["idempotency_key"] = f"{keys}-{i}"
        specs.append(spec)
    return json.dumps(specs)


class Loop(threading.Thread):
    """One connection's worth of submit → claim → complete until `deadline`."""

    def __init__(self, url: str, n: int, claim: str, pipelined: bool, deadline: float, name: str,
                 options: str = ""):
        super().__init__(daemon=True)
        self.options = options
        self.url, self.n, self.claim, self.pipelined = url, n, claim, pipelined
        self.deadline, self.worker = deadline, name
        self.specs = specs_json(n)
        self.results = ['{"ok": true}'] * n
        self.done = 0
        self.ms = {"submit_many": [], "claim": [], "complete_many": []}
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            with connect(self.url, **({"options": self.options} if self.options else {})) as conn:
                (self._pipelined if self.pipelined else self._calls)(conn)
        except BaseException as exc:  # noqa: BLE001 — reported by the caller
            self.error = exc

    def _claim_args(self, ids):
        return (ids, self.worker) if self.claim == "claim_many" else (self.worker, self.n)

    def _calls(self, conn) -> None:
        sql = CLAIM_MANY if self.claim == "claim_many" else CLAIM_NEXT
        while time.perf_counter() < self.deadline:
            t0 = time.perf_counter()
            ids = [r[0] for r in conn.execute(SUBMIT, (self.specs,))]
            t1 = time.perf_counter()
            leases = conn.execute(sql, self._claim_args(ids)).fetchall()
            t2 = time.perf_counter()
            accepted = self._complete(conn, leases)
            t3 = time.perf_counter()
            self.ms["submit_many"].append((t1 - t0) * 1000)
            self.ms["claim"].append((t2 - t1) * 1000)
            self.ms["complete_many"].append((t3 - t2) * 1000)
            self.done += accepted

    def _complete(self, conn, leases) -> int:
        if not leases:
            return 0
        return conn.execute(COMPLETE, ([l[0] for l in leases], self.worker, [l[1] for l in leases],
                                       self.results[:len(leases)], [l[2] for l in leases])).fetchone()[0]

    def _pipelined(self, conn) -> None:
        sql = CLAIM_MANY if self.claim == "claim_many" else CLAIM_NEXT
        to_claim, to_complete = None, None
        stopping = False
        with conn.pipeline() as pipe:
            while True:
                stopping = stopping or time.perf_counter() >= self.deadline
                cur_s = cur_c = cur_d = None
                if not stopping:
                    conn.execute("BEGIN"); cur_s = conn.execute(SUBMIT, (self.specs,)); conn.execute("COMMIT")
                if to_claim is not None:
                    conn.execute("BEGIN"); cur_c = conn.execute(sql, self._claim_args(to_claim)); conn.execute("COMMIT")
                if to_complete:
                    conn.execute("BEGIN")
                    cur_d = conn.execute(COMPLETE, ([l[0] for l in to_complete], self.worker,
                                                    [l[1] for l in to_complete],
                                                    self.results[:len(to_complete)],
                                                    [l[2] for l in to_complete]))
                    conn.execute("COMMIT")
                if cur_s is None and cur_c is None and cur_d is None:
                    break
                pipe.sync()
                # Work queued after the deadline still counts: the rounds are drained so the
                # table ends clean, and the caller divides by the time the drain took too.
                to_complete = cur_c.fetchall() if cur_c is not None else None
                to_claim = [r[0] for r in cur_s.fetchall()] if cur_s is not None else None
                if cur_d is not None:
                    self.done += cur_d.fetchone()[0]


def measure(settings: Settings, n: int, claim: str, pipelined: bool, options: str = "") -> float:
    """One run: jobs/s over both connections; per-call ms kept on the loops."""
    deadline = time.perf_counter() + settings.seconds
    loops = [Loop(settings.url, n, claim, pipelined, deadline, f"bench-{i}", options)
             for i in range(CONNECTIONS)]
    t0 = time.perf_counter()
    for loop in loops:
        loop.start()
    for loop in loops:
        loop.join(settings.seconds + 120)
    elapsed = time.perf_counter() - t0
    for loop in loops:
        if loop.error:
            raise loop.error
    measure.last = loops
    return sum(l.done for l in loops) / elapsed


def cases(settings: Settings):
    if settings.quick:
        return [(100, "claim_many", False), (100, "claim_many", True), (1000, "claim_many", True),
                (1, "claim_many", False)]
    return [(1, "claim_many", False), (100, "claim_many", False), (100, "claim_many", True),
            (1000, "claim_many", False), (1000, "claim_many", True), (100, "claim_next", False),
            (100, "claim_next", True), (1000, "claim_next", True)]


def run(settings: Settings, admin) -> dict:
    results = {}
    counters = Counters(admin, settings.dbname)
    for n, claim, pipelined in cases(settings):
        name = f"{'pipelined' if pipelined else 'calls'}_{claim}_{n}"
        rates, wal, xact, per_call = [], [], [], {"submit_many": [], "claim": [], "complete_many": []}
        for rep in range(settings.reps):
            reset(admin)
            before = counters.read()
            rate = measure(settings, n, claim, pipelined)
            done = sum(l.done for l in measure.last)
            time.sleep(0.6)  # lets the backends flush their WAL and transaction counters
            d = Counters.delta(before, counters.read())
            rates.append(rate)
            if done:
                wal.append(d["lsn"] / done)
                xact.append(d["xact"] / done)
            for key in per_call:
                calls = [ms for l in measure.last for ms in l.ms[key]]
                if calls:
                    calls.sort()
                    per_call[key].append(calls[len(calls) // 2])
            progress(f"sql path {name}: run {rep + 1}/{settings.reps}: {rate:,.0f} jobs/s")
        results[name] = {
            "batch": n, "claim": claim, "pipelined": pipelined, "connections": CONNECTIONS,
            "jobs_per_s": figure(rates, "jobs/s"),
            "wal_bytes_per_job": figure(wal, "B/job"),
            "transactions_per_job": figure(xact, "xact/job"),
            "call_ms": {k: figure(v, "ms") for k, v in per_call.items()} if not pipelined else {},
        }
    reset(admin)
    return results


def function_profile(settings: Settings, admin) -> dict:
    """Server time per job in each jobs.* function (track_functions, superuser only), for one
    call-by-call run of batches of 100: where the SQL path's time goes. A function's self
    time excludes the jobs.* functions it calls; total time includes them."""
    reset(admin)
    try:
        admin.execute("SELECT pg_stat_reset()")
        measure(settings, 100, "claim_many", False, options="-c track_functions=all")
    except Exception as exc:  # noqa: BLE001 — a profile we cannot take is just missing
        return {"error": str(exc)}
    done = sum(l.done for l in measure.last)
    time.sleep(1.2)  # the loops' backends flush their function counters as they exit
    admin.execute("SELECT pg_stat_clear_snapshot()")
    rows = admin.execute("""
        SELECT funcname, calls, total_time, self_time FROM pg_stat_user_functions
         WHERE schemaname = 'jobs' ORDER BY self_time DESC""").fetchall()
    reset(admin)
    return {"jobs": done, "functions": [
        {"function": f, "calls_per_job": c / done, "total_us_per_job": t * 1000 / done,
         "self_us_per_job": st * 1000 / done} for f, c, t, st in rows] if done else []}


def submit_compare(settings: Settings, admin) -> dict:
    """submit_many of 1,000 specs from one connection vs a plain multi-row INSERT of the same
    rows into the plain table (and the same rows with their events and rollup: the
    same-writes ceiling of a submit), without and with idempotency keys."""
    from .ceilings import insert_only
    n = 1000
    out = {}
    with connect(settings.url) as conn:
        for keys in (False, True):
            for what in ("submit_many", "plain_insert", "same_writes_insert"):
                rates, ms_runs = [], []
                for rep in range(settings.reps):
                    reset(admin)
                    deadline = time.perf_counter() + settings.seconds / 2
                    ms = []
                    while time.perf_counter() < deadline:
                        if what != "submit_many":
                            ms.append(insert_only(settings, conn, n, keys, same_writes=what == "same_writes_insert"))
                        else:
                            specs = specs_json(n, keys=f"k{time.monotonic_ns()}" if keys else None)
                            t = time.perf_counter()
                            conn.execute(SUBMIT, (specs,)).fetchall()
                            ms.append((time.perf_counter() - t) * 1000)
                    ms.sort()
                    ms_runs.append(ms[len(ms) // 2])
                    rates.append(n * len(ms) / (sum(ms) / 1000))
                name = f"{what}{'_keys' if keys else ''}"
                out[name] = {"jobs_per_s": figure(rates, "jobs/s"), "call_ms": figure(ms_runs, "ms"),
                             "specs_per_call": n, "idempotency_keys": keys}
                progress(f"submit 1,000 per call, {name}: {out[name]['jobs_per_s']['median']:,.0f} jobs/s")
    reset(admin)
    return out
