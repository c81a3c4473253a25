"""The table on stdout, the JSON file and the PNG charts under bench/results/."""

from __future__ import annotations

import json
from pathlib import Path

from .common import ratio

ROW = "{:<52} {:>12} {:>21} {:>9}  {}"


def _fmt(x, unit="") -> str:
    if x is None:
        return "-"
    if unit in ("ms", "MB") or abs(x) < 100:
        return f"{x:,.2f}"
    return f"{x:,.0f}"


def _row(lines, label, fig, ceiling=None, note=""):
    if not fig:
        return
    r = ratio(fig, ceiling) if ceiling else None
    spread = f"{_fmt(fig['min'], fig['unit'])}–{_fmt(fig['max'], fig['unit'])}" if fig["min"] is not None else "-"
    lines.append(ROW.format(label, _fmt(fig["median"], fig["unit"]) + " " * 0, spread,
                            f"{r:.3f}" if r is not None else "", f"{fig['unit']} {note}".rstrip()))


def _profiles(lines: list[str], profiles: dict | None) -> None:
    for tag, prof in (profiles or {}).items():
        if not prof.get("self"):
            continue
        lines.append(f"    py-spy {tag.split('-')[0]}: {prof['busy_share']:.0%} of a core's samples busy or "
                     f"waiting on PostgreSQL; top self time ({prof['file']}):")
        for frame, share in prof["self"][:8]:
            lines.append(f"      {share:6.1%}  {frame[:100]}")


def table(res: dict) -> str:
    lines = [ROW.format("figure", "median", "min–max", "ratio", "unit / ratio to"), "-" * 118]
    ceil = res.get("ceilings", {})
    c1, c100 = ceil.get("batch_1", {}), ceil.get("batch_100", {})
    sw1, sw100 = ceil.get("same_writes_1", {}), ceil.get("same_writes_100", {})
    if ceil:
        lines.append("1. pgbench ceilings (2 clients): bare = the job row alone; same writes = job row, "
                     "rollup upserts (the job row records a first attempt's transitions)")
        for name, c in (("unbatched", c1), ("batches of 100", c100),
                        ("same writes, unbatched", sw1), ("same writes, batches of 100", sw100)):
            _row(lines, f"  {name}: jobs/s", c.get("jobs_per_s"))
            for stmt, fig in c.get("statement_ms", {}).items():
                _row(lines, f"  {name}: {stmt} statement ms", fig)
            _row(lines, f"  {name}: WAL bytes/job", c.get("wal_bytes_per_job"))
        if ceil.get("transition_rows_100"):
            lines.append("  beside the same writes, batches of 100 (ratio: to the same writes)")
            for label, key in (("with a transition row per claim and completion (release 0.1)", "transition_rows_100"),
                               ("the job row alone (bare, as above)", "batch_100")):
                _row(lines, f"    {label}", ceil[key].get("jobs_per_s"), sw100.get("jobs_per_s"), "same writes")
    sql = res.get("sql_path", {})
    if sql:
        lines.append("2. SQL path (2 connections, no Redis)")
        stmt_of = {"submit_many": "insert", "claim": "claim", "complete_many": "complete"}
        for name, r in sql.items():
            c = c1 if r["batch"] == 1 else c100
            label = f"  {'pipelined' if r['pipelined'] else 'call by call'} {r['claim']} batch {r['batch']}"
            _row(lines, label + ": jobs/s", r["jobs_per_s"], c.get("jobs_per_s"),
                 f"pgbench {'unbatched' if r['batch'] == 1 else 'batch 100'}")
            sw = sw1 if r["batch"] == 1 else sw100
            _row(lines, label + ": jobs/s", r["jobs_per_s"], sw.get("jobs_per_s"),
                 f"same writes {'unbatched' if r['batch'] == 1 else 'batch 100'}")
            for call, fig in r.get("call_ms", {}).items():
                ceiling_ms = c.get("statement_ms", {}).get(stmt_of[call]) if r["batch"] in (1, 100) else None
                _row(lines, f"    {call} ms per call", fig, ceiling_ms, "plain statement" if ceiling_ms else "")
            _row(lines, label + ": WAL bytes/job", r.get("wal_bytes_per_job"), c.get("wal_bytes_per_job"), "pgbench")
            _row(lines, label + ": transactions/job", r.get("transactions_per_job"))
    sub = res.get("submit", {})
    if sub:
        lines.append("   submit 1,000 specs per call, one connection")
        for keys in ("", "_keys"):
            _row(lines, f"  submit_many{' (idempotency keys)' if keys else ''}: jobs/s",
                 sub.get(f"submit_many{keys}", {}).get("jobs_per_s"),
                 sub.get(f"plain_insert{keys}", {}).get("jobs_per_s"), "plain multi-row INSERT")
            _row(lines, f"  submit_many{' (idempotency keys)' if keys else ''}: jobs/s",
                 sub.get(f"submit_many{keys}", {}).get("jobs_per_s"),
                 sub.get(f"same_writes_insert{keys}", {}).get("jobs_per_s"), "same writes (INSERT + rollup)")
            _row(lines, f"  plain INSERT{' (keys)' if keys else ''}: jobs/s", sub.get(f"plain_insert{keys}", {}).get("jobs_per_s"))
            _row(lines, f"  same writes{' (keys)' if keys else ''}: jobs/s",
                 sub.get(f"same_writes_insert{keys}", {}).get("jobs_per_s"))
            _row(lines, f"  submit_many{' (keys)' if keys else ''}: ms per call", sub.get(f"submit_many{keys}", {}).get("call_ms"),
                 sub.get(f"plain_insert{keys}", {}).get("call_ms"), "plain INSERT")
    nt = res.get("notify", {})
    if nt.get("producers"):
        lines.append("2b. NOTIFY under many writers (jobs.submit, one job per transaction, a listener draining)")
        for producers, row in nt["producers"].items():
            for mode, label in (("no_notify", "notify off"), ("notify", "notify on"),
                                ("table", "relay reads the table")):
                ratio_ = {"notify": row["ratio"], "table": row["table_ratio"]}.get(mode)
                lines.append(ROW.format(f"  {producers} producers, {label}: submits/s", f"{row[mode]['median']:,.0f}",
                                        f"{row[mode]['min']:,.0f}–{row[mode]['max']:,.0f}",
                                        f"{ratio_:.3f}" if ratio_ else "", "submits/s" + (" / notify off" if ratio_ else "")))
    prof = res.get("sql_profile", {})
    if prof.get("functions"):
        lines.append("   server time per job by jobs.* function (call by call, batch 100; self / total µs)")
        for f in prof["functions"][:8]:
            lines.append(f"     {f['function']:<30} {f['calls_per_job']:>7.3f} calls/job {f['self_us_per_job']:>9.1f} "
                         f"{f['total_us_per_job']:>9.1f} µs/job")
    e2e = res.get("e2e", {})
    if e2e:
        lines.append("3. end to end (producers → Redis → jobfence worker → done, relay running)")
        if e2e.get("async_skipped"):
            lines.append(f"  async handler: skipped ({e2e['async_skipped']})")
        for r in e2e.get("configs", []):
            label = f"  {r['workers']} worker(s) × batch {r['batch']} {r['handler']}"
            if r.get("error"):
                lines.append(f"{label}: failed: {r['error'].splitlines()[0][:70]}")
                continue
            c = c1 if r["batch"] == 1 else c100
            _row(lines, label + ": jobs/s", r["jobs_per_s"], c.get("jobs_per_s"),
                 f"pgbench {'unbatched' if r['batch'] == 1 else 'batch 100'}")
            for which in ("start", "done"):
                figs = [r.get(f"submit_to_{which}_{q}") for q in ("p50", "p95", "p99")]
                if all(f and f["median"] is not None for f in figs):
                    lines.append(ROW.format(f"    submit→{which} p50 / p95 / p99",
                                            " / ".join(f"{f['median']:,.1f}" for f in figs), "", "", "ms"))
            _row(lines, "    producer submit_many(1,000) ms", r.get("submit_many_ms"))
            per = r.get("jobs_per_call") or {}
            if per.get("claim"):
                lines.append(ROW.format("    jobs per claim_many / per complete_many", f"{per['claim']:.1f}",
                                        f"{per['complete'] or 0:.1f}", "", "jobs (1 run)"))
            if r.get("transactions_per_job") is not None:
                lines.append(ROW.format("    transactions / WAL bytes per job", f"{r['transactions_per_job']:.3f}",
                                        f"{r['wal_bytes_per_job']:,.0f}", "", "xact, B (1 run)"))
            _row(lines, "    worker peak RSS", r.get("worker_rss_mb"))
            _profiles(lines, r.get("profile"))
        for r in e2e.get("configs", []):
            rest = r.get("at_rest")
            if rest:
                lines.append(f"4. latency at rest (one job at a time, {r['workers']} workers × batch {r['batch']})")
                for key in ("submit_to_start_p50", "submit_to_start_p99", "submit_to_done_p50", "submit_to_done_p99"):
                    _row(lines, "  " + key.replace("_to_", "→").replace("_p", " p"), rest.get(key))
    jd = res.get("judged", {})
    if jd:
        lines.append(f"3a. judged: {jd['jobs']:,} jobs via jobs.submit_many (1,000/call, relay pushing) → "
                     "2 × jobfence worker --batch 100")
        _row(lines, "  jobs/s, first submit to last done", jd["jobs_per_s"])
        _row(lines, "  pgbench batch-100 ceiling, alternating runs", jd["ceiling_batch_100"])
        _row(lines, "  ratio, pairwise", jd["ratio_to_ceiling"])
        _row(lines, "  pgbench same-writes batch-100 ceiling, alternating runs", jd.get("same_writes_batch_100"))
        _row(lines, "  ratio to the same writes, pairwise", jd.get("ratio_to_same_writes"))
        for k, fig in jd.get("cpu_us_per_job", {}).items():
            _row(lines, f"  CPU per job: {k}", fig)
        _profiles(lines, jd.get("profile"))
    obs = res.get("observe")
    if obs:
        lines.append("2a. the metrics rollup on the SQL path (batch 100, backend CPU per job)")
        _row(lines, "  with jobs.tally", obs["backend_cpu_us_per_job"])
        _row(lines, "  with a no-op jobs.tally", obs["without_tally_us_per_job"])
        _row(lines, "  overhead", obs["overhead"])
    scale = res.get("scale", {})
    if scale:
        lines.append("5. scale (SQL path call by call, batch 100; claim_next of 1)")
        empty = scale["states"].get("empty", {})
        for name, s in scale["states"].items():
            _row(lines, f"  {name}: jobs/s", s["jobs_per_s"])
            if s.get("vs_ceiling"):
                _row(lines, f"  {name}: jobs/s ÷ pgbench batch 100", s["vs_ceiling"],
                     empty.get("vs_ceiling") if name != "empty" else None,
                     "empty table's" if name != "empty" else "")
            _row(lines, f"  {name}: claim_next p50 ms", s["claim_next_p50"])
            _row(lines, f"  {name}: claim_next p99 ms", s["claim_next_p99"])
            for query, fig in s.get("observe", {}).items():
                _row(lines, f"  {name}: {query} ms", fig)
        b = scale.get("bytes_per_million_done")
        if b:
            lines.append("  bytes per million done jobs (rows only: a first attempt's history is its row): " + ", ".join(
                f"{k} {v / 2**20:,.0f} MiB" for k, v in b.items()))
    lines += api_table(res.get("api"))
    lines += pooler_table(res.get("pooler"))
    lines += peers_table(res.get("peers"))
    lines += targets(res)
    return "\n".join(lines)


def pooler_table(pooler: dict | None) -> list[str]:
    """Worker processes × batch 100 through PgBouncer, each as a ratio to 2 direct workers."""
    if not pooler:
        return []
    if pooler.get("skipped"):
        return [f"8. through PgBouncer: skipped ({pooler['skipped']})"]
    lines = [f"8. through PgBouncer (transaction mode, {pooler['pool_size']} server sessions), batch 100"]
    direct = (pooler.get("direct") or {}).get("jobs_per_s")
    _row(lines, "  2 workers, direct connections: jobs/s", direct)
    for r in pooler.get("through_pgbouncer", []):
        label = f"  {r['workers']} worker(s) through pgbouncer"
        if r.get("error"):
            lines.append(f"{label}: failed: {r['error'].splitlines()[0][:70]}")
            continue
        _row(lines, label + ": jobs/s", r["jobs_per_s"], direct, "2 workers direct")
        done = [r.get(f"submit_to_done_{q}") for q in ("p50", "p99")]
        if all(f and f["median"] is not None for f in done):
            lines.append(ROW.format("    submit→done p50 / p99", " / ".join(f"{f['median']:,.1f}" for f in done),
                                    "", "", "ms"))
        if r.get("pg_waits"):
            shares = {k: v for k, v in r["pg_waits"].items() if not isinstance(v, dict)}
            lines.append("    PostgreSQL backends: " + ", ".join(
                f"{k} {v:.0%}" for k, v in list(shares.items())[:4]))
            calls = r["pg_waits"].get("lock waits by call")
            if calls:
                lines.append("    row-lock waits in: " + ", ".join(f"{k} {v:.0%}" for k, v in calls.items()))
    return lines


def peers_table(peers: dict | None) -> list[str]:
    """Each system's jobs/s from its own records, and jobfence's over it round by round."""
    if not peers:
        return []
    if peers.get("skipped"):
        return [f"9. beside the peers: skipped ({peers['skipped']})"]
    lines = [f"9. beside the peers: {peers['jobs']:,} no-op jobs, producer running while the consumers "
             f"consume, {peers['rounds']} rounds in turn ({', '.join(peers['order'])});",
             "   jobs/s from each one's own records, first submit to last finish; ratio = jobfence ÷ it, "
             "round by round"]
    for name, s in peers["systems"].items():
        label = f"  {name}{' ' + s['version'] if s.get('version') else ''}"
        for err in s.get("errors", []):
            lines.append(f"{label}: a run failed: {err.strip().splitlines()[-1][:90] if err.strip() else '?'}")
        fig = s["jobs_per_s"]
        if fig["median"] is None:
            continue
        r = s.get("jobfence_over_it")
        lines.append(ROW.format(label + ": jobs/s", _fmt(fig["median"]), f"{_fmt(fig['min'])}–{_fmt(fig['max'])}",
                                f"{r['median']:.2f}" if r and r["median"] else "",
                                "jobs/s" + (" jobfence ÷ it (pairwise)" if r and r["median"] else "")))
        if r and r["median"]:
            lines.append(ROW.format("    jobfence ÷ it, each round", "", " / ".join(f"{x:.2f}" for x in r["runs"]),
                                    "", "x"))
        lat = [s["latency_p50_ms"]["median"], s["latency_p99_ms"]["median"]]
        if None not in lat:
            lines.append(ROW.format("    submit→finish p50 / p99 under that load", " / ".join(f"{x:,.0f}" for x in lat),
                                    "", "", "ms"))
        if s["submit_per_s"]["median"]:
            _row(lines, "    the producer's submit rate", s["submit_per_s"])
        if s["rss_max_mb"]["median"]:
            lines.append(ROW.format(f"    peak RSS: largest process / all {s['processes']} processes",
                                    f"{s['rss_max_mb']['median']:.0f} / {s['rss_total_mb']['median']:.0f}",
                                    "", "", "MB"))
        lines.append(f"    not guaranteed: {s['not_guaranteed']}" if name != "jobfence" else
                     f"    {s['not_guaranteed']}")
    fastest = peers.get("fastest_peer")
    if fastest:
        r = peers["systems"][fastest]["jobfence_over_it"]
        if r and r["median"]:
            lines.append(ROW.format(f"  jobfence ÷ the fastest peer ({fastest})", "", "", f"{r['median']:.2f}",
                                    "x, pairwise median"))
    return lines + writes_allow_lines(peers.get("writes_allow"), fastest)


def writes_allow_lines(allow: dict | None, fastest: str | None) -> list[str]:
    """What the writes alone allow, beside the fastest peer (peers.writes_allow)."""
    if not allow or not allow["same_writes"]["jobs_per_s"]["median"]:
        return []
    m = allow["measured"]
    lines = [f"  what the writes allow: PostgreSQL at only the writes' CPU per job (pgbench, batches of 100, "
             f"same round), workers and relay as measured, {allow['cores']} cores"]
    for name, label in (("same_writes", "the same writes (job row, rollup)"),
                        ("job_row", "the job row alone (no rollup)")):
        a = allow[name]
        lines.append(ROW.format(f"    {label}", _fmt(a["jobs_per_s"]["median"]),
                                f"{_fmt(a['jobs_per_s']['min'])}–{_fmt(a['jobs_per_s']['max'])}",
                                f"{a['over_peer']['median']:.2f}", f"jobs/s at most; x {fastest}"))
        _row(lines, f"      PostgreSQL CPU per job for {name.replace('_', ' ')}", a["postgres_cpu_us_per_job"])
    lines.append(ROW.format("    CPU per job measured: PostgreSQL / workers / relay",
                            " / ".join(f"{m[k]['median']:.1f}" for k in ("postgres", "workers", "relay")),
                            "", "", "µs/job"))
    _row(lines, f"    {allow['target']:g} x {fastest} leaves, for everything", allow["budget_us_per_job"])
    return lines


def api_table(api: dict | None) -> list[str]:
    if not api:
        return []
    lines = ["7. HTTP API (jobfence api --no-auth; pgbench of a plain INSERT from as many clients)"]
    if api.get("skipped") or api.get("error"):
        why = api.get("skipped") or api["error"]
        return lines + [f"  {'skipped' if api.get('skipped') else 'failed'}: {why.splitlines()[0][:100]}"]
    for r in api.get("post_jobs", []) + ([api["batch"]] if api.get("batch") else []):
        n, per = r["clients"], r["jobs_per_request"]
        what = "POST /jobs" if per == 1 else f"POST /jobs/batch ({per:,} specs)"
        stmt = "single-row INSERT" if per == 1 else f"{per:,}-row INSERT"
        rate, ratio_ = r["rate"], _median(r["ratio_to_ceiling"])
        spread = f"{_fmt(rate['min'])}–{_fmt(rate['max'])}" if rate["min"] is not None else "-"
        lines.append(ROW.format(f"  {what}, {n} client{'s' * (n > 1)}", _fmt(rate["median"]), spread,
                                f"{ratio_:.3f}" if ratio_ is not None else "",
                                f"{rate['unit']} pgbench {stmt} (pairwise)"))
        _row(lines, f"    pgbench {stmt}, {n} client{'s' * (n > 1)}", r["ceiling"])
        _row(lines, "    latency p50", r["latency_p50_ms"])
        _row(lines, "    latency p99", r["latency_p99_ms"])
        cpu = r.get("cpu_us_per_request") or {}
        if cpu:
            lines.append(ROW.format("    CPU per request: client / api / postgres", " / ".join(
                f"{_median(cpu.get(k)) or 0:,.0f}" for k in ("client", "api", "postgres")), "", "", "µs"))
        if r.get("errors"):
            lines.append(f"    {r['errors']} failed requests, first: {(r.get('first_error') or '')[:80]}")
        if r.get("jobs_in_db") != r.get("jobs_accepted"):
            lines.append(f"    202s {r['jobs_accepted']:,} but {r['jobs_in_db']:,} rows in jobs.job")
    return lines


def _median(fig):
    return (fig or {}).get("median")


def targets(res: dict) -> list[str]:
    """Issue 29's targets next to what this run measured, as ratios to ceilings of the same
    run (informative: nothing here fails)."""
    ceil = res.get("ceilings", {})
    c1 = _median(ceil.get("batch_1", {}).get("jobs_per_s"))
    sw100 = _median(ceil.get("same_writes_100", {}).get("jobs_per_s"))
    out = ["", f"{'targets (issue 29)':<53} measured"]

    def add(label, text):
        out.append(f"  {label:<51} {text}")

    def of(value, ceiling, name):
        return f"{value:,.0f} jobs/s = {value / ceiling:.3f} x {name} {ceiling:,.0f}" if ceiling else f"{value:,.0f} jobs/s"

    sql = res.get("sql_path", {})
    best = max((_median(r["jobs_per_s"]) or 0 for r in sql.values() if r["batch"] == 100), default=None)
    if best:
        add("SQL path, batch 100 >= 0.8 x same writes, >= 20k/s", of(best, sw100, "same writes"))
    jd = res.get("judged")
    if jd:
        ratio = _median(jd.get("ratio_to_same_writes"))
        add("judged end to end >= 0.6 x same writes", f"{_median(jd['jobs_per_s']):,.0f} jobs/s"
            + (f" = {ratio:.3f} x same-run same writes (pairwise median)" if ratio else ""))
    configs = {(c["workers"], c["batch"], c["handler"]): c for c in res.get("e2e", {}).get("configs", [])}
    b1 = [c for c in configs.values() if c["batch"] == 1 and not c.get("error")]
    if b1 and c1:
        add("batch 1 >= 0.6 x unbatched ceiling", of(max(_median(c["jobs_per_s"]) for c in b1), c1, "unbatched"))
    sub = res.get("submit", {})
    if sub.get("submit_many_keys") and sub.get("same_writes_insert_keys"):
        s = _median(sub["submit_many_keys"]["jobs_per_s"])
        add("submit_many 1,000/call (keys), vs same writes", of(s, _median(sub["same_writes_insert_keys"]["jobs_per_s"]),
                                                                 "same writes"))
    notify = res.get("notify", {})
    if notify.get("producers"):
        worst = notify["producers"].get("32")
        if worst:
            add("NOTIFY cost at 32 producers (mode offered > 20 %)",
                f"{1 - worst['ratio']:.0%} fewer submits/s with notify on")
    judged = configs.get((2, 100, "sync"))
    if judged and not judged.get("error"):
        if judged.get("worker_rss_mb"):
            add("worker RSS < 80 MB", f"{_median(judged['worker_rss_mb']):.1f} MB peak")
        rest = judged.get("at_rest")
        if rest:
            add("idle submit->start p50 < 5 ms, p99 < 20 ms",
                f"p50 {_median(rest['submit_to_start_p50']):.2f} ms, p99 {_median(rest['submit_to_start_p99']):.2f} ms")
    states = res.get("scale", {}).get("states", {})
    if "empty" in states:
        biggest = [k for k in states if k.startswith("terminal_")]
        if biggest:
            k = biggest[-1]
            key = "vs_ceiling" if states[k].get("vs_ceiling") else "jobs_per_s"
            r = _median(states[k][key]) / _median(states["empty"][key])
            add(f"{k.split('_')[1]} terminal rows >= 0.9 x empty (10 M asked)", f"{r:.3f} x")
    return out


def charts(res: dict, out: Path) -> list[Path]:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    made = []
    configs = [c for c in res.get("e2e", {}).get("configs", []) if not c.get("error")]
    if configs:
        fig, ax = plt.subplots(figsize=(8, 4.5))
        handlers = sorted({c["handler"] for c in configs})
        batches = sorted({c["batch"] for c in configs})
        for h in handlers:
            for b in batches:
                pts = sorted((c["workers"], c["jobs_per_s"]["median"], c["jobs_per_s"]["min"], c["jobs_per_s"]["max"])
                             for c in configs if c["handler"] == h and c["batch"] == b)
                if pts:
                    xs, ys, lo, hi = zip(*pts)
                    ax.errorbar(xs, ys, yerr=[[y - l for y, l in zip(ys, lo)], [h_ - y for y, h_ in zip(ys, hi)]],
                                marker="o", capsize=3, label=f"{h}, batch {b}")
        c100 = res.get("ceilings", {}).get("batch_100", {}).get("jobs_per_s", {}).get("median")
        if c100:
            ax.axhline(c100, linestyle="--", color="grey", label="pgbench ceiling, batch 100")
        ax.set_xlabel("worker processes")
        ax.set_ylabel("jobs/s")
        ax.set_yscale("log")
        ax.set_xticks(sorted({c["workers"] for c in configs}))
        ax.set_title("end to end throughput (median of 3, min–max)")
        ax.legend(fontsize=8)
        fig.tight_layout()
        path = out / "throughput.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        made.append(path)
    curves = []
    for c in configs:
        if c.get("cdf", {}).get("done_ms"):
            tag = f"{c['workers']}×{c['batch']} {c['handler']}"
            curves.append((f"{tag} submit→start", c["cdf"]["start_ms"]))
            curves.append((f"{tag} submit→done", c["cdf"]["done_ms"]))
        if c.get("at_rest", {}).get("cdf", {}).get("done_ms"):
            curves.append(("at rest submit→start", c["at_rest"]["cdf"]["start_ms"]))
            curves.append(("at rest submit→done", c["at_rest"]["cdf"]["done_ms"]))
    if curves:
        fig, ax = plt.subplots(figsize=(8, 4.5))
        for label, xs in curves:
            xs = sorted(max(x, 0.01) for x in xs)
            ax.plot(xs, [(i + 1) / len(xs) for i in range(len(xs))], label=label)
        ax.set_xscale("log")
        ax.set_xlabel("ms")
        ax.set_ylabel("fraction of jobs")
        ax.set_title("latency CDF")
        ax.legend(fontsize=7)
        fig.tight_layout()
        path = out / "latency_cdf.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        made.append(path)
    return made


def write(res: dict, out: Path, stamp: str, latest: bool = True) -> tuple[Path, list[Path]]:
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"bench-{stamp}.json"
    path.write_text(json.dumps(res, indent=1, default=str))
    if not latest:  # an interrupted run keeps its JSON but not the charts and latest.json
        return path, []
    (out / "latest.json").write_text(path.read_text())
    return path, charts(res, out)
