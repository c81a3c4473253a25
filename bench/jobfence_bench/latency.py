"""Latency at rest: one job at a time on an otherwise idle system (the workers of the judged
configuration, blocked in their pop), submit→start and submit→done from the job's own
timestamps in PostgreSQL."""

from __future__ import annotations

import time

from .common import figure, progress, scalar


def run(settings, admin, client, kind: str) -> dict:
    n = 60 if settings.quick else 300
    ids = []
    for _ in range(n):
        job_id = client.submit(kind, {})
        deadline = time.monotonic() + 10
        while scalar(admin, "SELECT status::text FROM jobs.job WHERE id = %s", (job_id,)) != "done":
            if time.monotonic() > deadline:
                break
            time.sleep(0.002)
        ids.append(job_id)
        time.sleep(0.02)  # idle between jobs: the workers go back to their blocking pop
    def read(part):
        rows = admin.execute("""
            SELECT extract(epoch FROM claimed_at - created_at) * 1000, extract(epoch FROM finished_at - created_at) * 1000
              FROM jobs.job WHERE id = ANY(%s) AND status = 'done'""", (part,)).fetchall()
        return sorted(float(r[0]) for r in rows), sorted(float(r[1]) for r in rows)

    def pct(xs, q):
        return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else None

    # Three runs of n/3 jobs each, so these figures too are a median of 3 with min–max.
    parts = [read(ids[i::settings.reps]) for i in range(settings.reps)]
    start, done = read(ids)
    out = {"jobs": n, "done": len(done)}
    for which, idx in (("start", 0), ("done", 1)):
        for q in (0.5, 0.99):
            out[f"submit_to_{which}_p{round(q * 100)}"] = figure([pct(p[idx], q) for p in parts], "ms")
    out["cdf"] = {"start_ms": start, "done_ms": done}
    progress(f"latency at rest: submit→start p50 {pct(start, 0.5) or 0:.2f} ms p99 {pct(start, 0.99) or 0:.2f} ms; "
             f"submit→done p50 {pct(done, 0.5) or 0:.2f} ms")
    return out
