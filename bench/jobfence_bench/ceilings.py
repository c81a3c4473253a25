"""The pgbench ceilings: the bare statements a hand-rolled queue would run on a plain table
of jobs.job's shape (submit = INSERT; claim = UPDATE … WHERE id = ANY … RETURNING; complete =
UPDATE … SET status = 'done'), each statement its own transaction, from 2 clients."""

from __future__ import annotations

import os
import re
import subprocess
import threading
import time

from .common import PLAIN_COLUMNS, Counters, Settings, figure, postgres_ticks, progress, reset

CLIENTS = 2
CLAIM = ("UPDATE plain_job SET status = 'processing', owned_by = 'bench-' || :client_id, "
         "lease_version = lease_version + 1, claimed_at = now(), "
         "lease_expires_at = now() + lease_timeout, updated_at = now() "
         "WHERE id = ANY (:ids::bigint[]) AND status = 'queued' RETURNING id, lease_version;")
COMPLETE = ("UPDATE plain_job SET status = 'done', result = '{\"ok\": true}', finished_at = now(), "
            "updated_at = now(), lease_expires_at = NULL "
            "WHERE id = ANY (:ids::bigint[]) AND owned_by = 'bench-' || :client_id AND lease_version = 1;")


def plain_values(n: int) -> str:
    """A literal VALUES list of n rows: the payloads are parsed per row, as a real one's are."""
    return ",".join(f"('bench', 'default', '{{\"n\": {i}}}', 3, '15 s', '30 s')" for i in range(n))


def script(batch: int) -> str:
    insert = (f"WITH ins AS (INSERT INTO plain_job ({PLAIN_COLUMNS}) VALUES {plain_values(batch)} "
              "RETURNING id) SELECT array_agg(id) AS ids FROM ins \\gset")
    return "\n".join([insert, CLAIM, COMPLETE]) + "\n"


# The same writes as the package's for a job done at its first attempt, without its checks:
# per job, the job row (same columns, defaults and indexes; it records the submission, the
# claim and the completion, docs/design.md "What is recorded where"), and per batch
# one upsert of the minute's rollup row (counters, and the wait or run histogram the real
# rollup writes at claim and at completion). Rows are found by primary key, as the functions
# find the ids they are given.
HIST = "array_fill(0, ARRAY[92])"
SHARD = ":client_id % 4"


def _rollup(column: str, hist: str | None, count: str) -> str:
    cols, vals, sets = f"minute, kind, shard, {column}", f"date_trunc('minute', now()), 'bench', {SHARD}, {count}", \
        f"{column} = m.{column} + excluded.{column}"
    if hist:
        cols, vals, sets = cols + f", {hist}", vals + f", {HIST}", sets + f", {hist} = excluded.{hist}"
    return (f"m AS (INSERT INTO plain_metric AS m ({cols}) VALUES ({vals}) "
            f"ON CONFLICT (minute, kind, shard) DO UPDATE SET {sets})")


def same_writes_script(batch: int, transition_rows: bool = False) -> str:
    def logged(rows: str, columns: str, values: str) -> str:
        if not transition_rows:
            return ""
        return (f"ev AS (INSERT INTO plain_event (job_id, {columns}) SELECT id, {values} FROM {rows}), ")

    submit = (f"WITH ins AS (INSERT INTO plain_job ({PLAIN_COLUMNS}) VALUES {plain_values(batch)} RETURNING id), "
              + _rollup("submitted", None, str(batch)) +
              " SELECT array_agg(id) AS ids FROM ins \\gset")
    claim = ("WITH c AS (" + CLAIM.rstrip(";") + "), "
             + logged("c", "from_status, to_status, lease_version, worker, reason",
                      "'queued', 'processing', lease_version, 'bench-' || :client_id, 'claimed'")
             + _rollup("started", "wait_hist", "(SELECT count(*) FROM c)") + " SELECT count(*) FROM c;")
    complete = ("WITH d AS (" + COMPLETE.rstrip(";") + " RETURNING id, lease_version), "
                + logged("d", "from_status, to_status, lease_version, worker, reason",
                         "'processing', 'done', lease_version, 'bench-' || :client_id, 'completed'")
                + _rollup("succeeded", "run_hist", "(SELECT count(*) FROM d)") + " SELECT count(*) FROM d;")
    return "\n".join([submit, claim, complete]) + "\n"


def transition_rows_script(batch: int) -> str:
    """The same writes with a transition row per claim and per completion, into the
    partitioned log: what release 0.1 wrote, and what a lease that ends otherwise than in its
    claimant's completion still writes."""
    return same_writes_script(batch, transition_rows=True)


def pgbench(settings: Settings, path, clients: int = CLIENTS) -> dict:
    # Rows found by primary key, as the functions find them: a table just truncated looks
    # empty to the planner, and a prepared statement's generic plan would then scan a table
    # that grows through the run, or AND the key's bitmap with the whole status-partial index.
    out = subprocess.run(
        ["pgbench", "-n", "-M", "prepared", "-r", "-c", str(clients), "-j", str(clients),
         "-T", str(max(1, round(settings.seconds))), "-f", str(path), settings.url],
        capture_output=True, text=True, timeout=settings.seconds + 120,
        env={**os.environ, "PGOPTIONS": "-c enable_seqscan=off -c enable_bitmapscan=off"})
    if out.returncode != 0:
        raise RuntimeError(f"pgbench failed: {out.stderr.strip()[-800:]}")
    tps = float(re.search(r"^tps = ([\d.]+)", out.stdout, re.M).group(1))
    # -r prints one "latency(ms) statement" line per command, in script order.
    lat = [float(m.group(1)) for m in re.finditer(r"^\s+([\d.]+)\s+\d+\s+(?:WITH|UPDATE|INSERT|SELECT)",
                                                    out.stdout, re.M)]
    if not lat:
        lat = [float(m.group(1)) for m in re.finditer(r"^\s+([\d.]+)\s+(?:WITH|UPDATE|INSERT|SELECT)",
                                                        out.stdout, re.M)]
    return {"tps": tps, "statement_ms": lat}


def pgbench_cpu(settings: Settings, path, batch: int) -> dict:
    """pgbench (as above) and the CPU PostgreSQL spent per job meanwhile, in µs. pgbench's own
    backends end with it, taking their counters along: /proc is read every 0.1 s during the
    run and each process's last reading kept (a tenth of a second of a 1 s run at most)."""
    before = postgres_ticks()
    last = dict(before)
    done = threading.Event()

    def watch():
        while not done.wait(0.1):
            last.update(postgres_ticks())

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        r = pgbench(settings, path)
    finally:
        done.set()
        watcher.join()
    last.update(postgres_ticks())
    seconds = sum(t - before.get(pid, 0) for pid, t in last.items()) / os.sysconf("SC_CLK_TCK")
    jobs = r["tps"] * batch * max(1, round(settings.seconds))
    return {**r, "jobs_per_s": r["tps"] * batch, "postgres_cpu_us_per_job": seconds / jobs * 1e6 if jobs else None}


def run(settings: Settings, admin) -> dict:
    """The bare ceilings (batch_1, batch_100) and the same-writes ones (same_writes_1,
    same_writes_100), each the median of its runs."""
    results = {}
    for name, make, batch in (("batch", script, 1), ("batch", script, 100),
                              ("same_writes", same_writes_script, 1), ("same_writes", same_writes_script, 100),
                              # What a transition row per step would add (release 0.1's
                              # writes); batch_100 is the job row alone.
                              ("transition_rows", transition_rows_script, 100)):
        path = settings.work / f"ceiling_{name}_{batch}.sql"
        path.write_text(make(batch))
        jobs, stmt = [], []
        counters = Counters(admin, settings.dbname)
        wal = []
        for rep in range(settings.reps):
            reset(admin)
            before = counters.read()
            r = pgbench(settings, path)
            after = counters.read()
            total_jobs = r["tps"] * batch * max(1, round(settings.seconds))
            wal.append(Counters.delta(before, after)["lsn"] / total_jobs)
            jobs.append(r["tps"] * batch)
            stmt.append(r["statement_ms"])
            progress(f"ceiling {name} {batch}: run {rep + 1}/{settings.reps}: {jobs[-1]:,.0f} jobs/s")
        names = ("insert", "claim", "complete")
        per_stmt = {n: figure([s[i] for s in stmt if len(s) == 3], "ms") for i, n in enumerate(names)}
        results[f"{name}_{batch}"] = {"jobs_per_s": figure(jobs, "jobs/s"), "statement_ms": per_stmt,
                                     "wal_bytes_per_job": figure(wal, "B/job"), "batch": batch,
                                     "clients": CLIENTS}
    reset(admin)
    return results


def insert_only(settings: Settings, conn, rows: int, keys: bool, same_writes: bool = False) -> float:
    """One multi-row INSERT of `rows` rows into the plain table, from this connection: ms.
    With `same_writes`, also the rollup's upsert, in the same statement (what submit_many
    writes: the job rows record their submission)."""
    payloads = [f'{{"n": {i}}}' for i in range(rows)]
    keyvals = [f"k{time.monotonic_ns()}-{i}" for i in range(rows)] if keys else [None] * rows
    insert = (f"INSERT INTO plain_job ({PLAIN_COLUMNS}, idempotency_key) "
              "SELECT 'bench', 'default', p::jsonb, 3, '15 s', '30 s', k "
              "FROM unnest(%s::text[], %s::text[]) AS u(p, k) RETURNING id")
    if same_writes:
        insert = (f"WITH ins AS ({insert}), "
                  + _rollup("submitted", None, str(rows)).replace(SHARD, "0") + " SELECT id FROM ins")
    t = time.perf_counter()
    conn.execute(insert, (payloads, keyvals)).fetchall()
    return (time.perf_counter() - t) * 1000
