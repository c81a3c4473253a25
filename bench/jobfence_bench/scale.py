"""Scale: the SQL path's throughput and claim latency with 0, 1 M and 10 M terminal rows
(quick: 0 and 100 k) and with a 1 M-job backlog (quick: 50 k), and what a million jobs
cost on disk.

Rows are generated straight into jobs.job and jobs.event as the owner, in the shape the
functions write (a job done at its first attempt is its row alone: the row records its
submission, claim and completion), so the set-up takes seconds per million instead of the
minutes the API would."""

from __future__ import annotations

import dataclasses
import time

from . import ceilings, sqlpath
from .common import Settings, connect, figure, progress, reset, scalar

CHUNK = 1_000_000
TERMINAL = """
INSERT INTO jobs.job (kind, queue, payload, status, result, created_at, updated_at, claimed_at,
                      finished_at, owned_by, lease_version, max_retries, lease_timeout, timeout, run_after)
SELECT 'bench', 'default', jsonb_build_object('n', g), 'done', '{"ok": true}', t - interval '2 s', t,
       t - interval '1 s', t, 'w', 1, 3, '15 s', '30 s', t - interval '2 s'
  FROM generate_series(1, %(n)s) AS g, (SELECT now() - interval '1 day' AS t) AS x
"""
QUEUED = """
INSERT INTO jobs.job (kind, queue, payload, max_retries, lease_timeout, timeout, run_after, created_at, updated_at)
SELECT 'bench', 'default', jsonb_build_object('n', g), 3, '15 s', '30 s', t, t, t
  FROM generate_series(1, %(n)s) AS g, (SELECT now() - interval '1 hour' AS t) AS x
"""
# A month of rollup minutes for the bench kind, every histogram full (the last day in all four
# shards, the days before as compaction folds them):
# what jobs.metric_minute holds on a server that ran this kind non-stop for 30 days.
ROLLUP = """
INSERT INTO jobs.metric_minute (minute, kind, shard, submitted, started, succeeded, failed, retried,
                                slo_met, ended_after, wait_hist, run_hist, latency_hist)
SELECT date_trunc('minute', now()) - m * interval '1 minute', 'bench', s, 600, 600, 590, 10, 10, 585,
       '{590,8,2,0}', h, h, h
  FROM generate_series(1, 30 * 1440) AS m, generate_series(0, CASE WHEN m <= 1440 THEN 3 ELSE 0 END) AS s,
       (SELECT array_agg((k % 7)::integer) AS h FROM generate_series(1, 92) AS k) AS x
ON CONFLICT DO NOTHING
"""
OBSERVE = {"queue_depth": "SELECT * FROM jobs.queue_depth",
           "metrics_1h": "SELECT * FROM jobs.metrics('1 hour')",
           "metrics_1d": "SELECT * FROM jobs.metrics('1 day')"}
# jobs.event is partitioned by day: its size is that of its partitions.
SIZES = """
SELECT pg_relation_size('jobs.job'), pg_indexes_size('jobs.job') + coalesce(pg_relation_size(reltoastrelid), 0),
       (SELECT coalesce(sum(pg_relation_size(p.relid)), 0)::bigint FROM pg_partition_tree('jobs.event') AS p WHERE p.isleaf),
       (SELECT coalesce(sum(pg_indexes_size(p.relid)), 0)::bigint FROM pg_partition_tree('jobs.event') AS p WHERE p.isleaf)
  FROM pg_class WHERE oid = 'jobs.job'::regclass
"""


def load(admin, n: int, sql: str, what: str) -> None:
    left = n
    while left > 0:
        step = min(CHUNK, left)
        admin.execute(sql, {"n": step})
        left -= step
        progress(f"scale: loaded {n - left:,}/{n:,} {what} jobs")
    # As on a server that accumulated these rows over time: otherwise autovacuum (where it is
    # on) may start on tens of millions of new rows mid-measurement.
    admin.execute("VACUUM ANALYZE jobs.job")
    admin.execute("CHECKPOINT")


def claim_latency(settings: Settings, admin, calls: int) -> dict:
    """claim_next(…, 1) one call at a time, oldest due job first, like an idle worker without
    Redis; the claimable jobs are submitted through the API first when there is no backlog."""
    if not scalar(admin, "SELECT count(*) FROM (SELECT 1 FROM jobs.job WHERE status = 'queued' LIMIT %s) q", (calls,)) >= calls:
        admin.execute("SELECT count(*) FROM jobs.submit_many(%s::jsonb)", (sqlpath.specs_json(calls),))
    ms = []
    with connect(settings.url) as conn:
        for _ in range(calls):
            t = time.perf_counter()
            conn.execute("SELECT job_id FROM jobs.claim_next('bench-scale', ARRAY['default'], 1)").fetchall()
            ms.append((time.perf_counter() - t) * 1000)
    ms.sort()
    return {"p50": ms[len(ms) // 2], "p99": ms[int(len(ms) * 0.99)]}


def observe_latency(settings: Settings, calls: int = 20) -> dict:
    """Milliseconds per call of the observability queries (docs/observability.md, "Cost")."""
    out = {}
    with connect(settings.url) as conn:
        for name, query in OBSERVE.items():
            conn.execute(query).fetchall()
            ms = []
            for _ in range(calls):
                t = time.perf_counter()
                conn.execute(query).fetchall()
                ms.append((time.perf_counter() - t) * 1000)
            out[name] = figure(ms, "ms")
    return out


def state(settings: Settings, admin, name: str) -> dict:
    rates, norm, p50, p99 = [], [], [], []
    script = settings.work / "ceiling_100.sql"
    script.write_text(ceilings.script(100))
    calls = 200 if settings.quick else 500
    short = dataclasses.replace(settings, seconds=1.0) if settings.quick else settings
    for rep in range(settings.reps):
        rates.append(sqlpath.measure(short, 100, "claim_many", False))
        # The batch-100 ceiling next to each run, on its small plain table: the machine's
        # load drifts over the minutes the loading takes, the ratio to the ceiling does not.
        admin.execute("TRUNCATE public.plain_job")
        norm.append(rates[-1] / (ceilings.pgbench(short, script)["tps"] * 100))
        lat = claim_latency(settings, admin, calls)
        p50.append(lat["p50"])
        p99.append(lat["p99"])
    out = {"jobs_per_s": figure(rates, "jobs/s"), "vs_ceiling": figure(norm, "x pgbench batch 100"),
           "claim_next_p50": figure(p50, "ms"),
           "claim_next_p99": figure(p99, "ms"),
           "rows": scalar(admin, "SELECT count(*) FROM jobs.job"),
           "observe": observe_latency(settings)}
    obs = out["observe"]
    progress(f"scale {name}: {out['jobs_per_s']['median']:,.0f} jobs/s "
             f"({out['vs_ceiling']['median']:.3f} x the ceiling), claim_next p50 "
             f"{out['claim_next_p50']['median']:.2f} ms; queue_depth "
             f"{obs['queue_depth']['median']:.1f} ms, metrics('1 hour') "
             f"{obs['metrics_1h']['median']:.1f} ms, metrics('1 day') {obs['metrics_1d']['median']:.1f} ms")
    return out


def run(settings: Settings, admin) -> dict:
    steps = [100_000] if settings.quick else [1_000_000, 9_000_000]
    backlog = 50_000 if settings.quick else 1_000_000
    reset(admin)
    # The last day with every shard written, as the sessions leave it, and folded as the
    # reaper's ticks would (timed); the 29 days before as compaction leaves them (one row a
    # minute), which is what the queries read either way.
    admin.execute(ROLLUP)
    started, folded = time.perf_counter(), 0
    while (n := scalar(admin, "SELECT jobs.compact_metrics(10000)")):
        folded += n
    compact_s = time.perf_counter() - started
    admin.execute("VACUUM ANALYZE jobs.metric_minute")
    results = {"states": {}, "rollup_rows": scalar(admin, "SELECT count(*) FROM jobs.metric_minute"),
               "rollup_compaction": {"rows_folded": folded, "seconds": compact_s}}
    progress(f"scale: rollup of 30 days; the last day's {folded:,} shard rows folded in {compact_s:.1f} s")
    results["states"]["empty"] = state(settings, admin, "empty")
    total = 0
    for step in steps:
        before = admin.execute(SIZES).fetchone()
        load(admin, step, TERMINAL, "terminal")
        after = admin.execute(SIZES).fetchone()
        total += step
        per_m = [(a - b) * 1_000_000 / step for a, b in zip(after, before)]
        results.setdefault("bytes_per_million_done", {
            "job_table": per_m[0], "job_indexes": per_m[1], "event_table": per_m[2],
            "event_indexes": per_m[3], "total": sum(per_m)})
        results["states"][f"terminal_{total}"] = state(settings, admin, f"{total:,} terminal rows")
    load(admin, backlog, QUEUED, "queued")
    results["states"][f"backlog_{backlog}"] = state(settings, admin, f"{backlog:,}-job backlog")
    results["terminal_steps"] = steps
    results["backlog"] = backlog
    reset(admin)
    return results
