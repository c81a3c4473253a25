"""The run's facts, read from the history once the system is quiet, the verdict on them, and
the human table. ``judge`` works on plain facts (a dict), so the verdict can be checked on a
made-up history as well as on a real one."""

from __future__ import annotations

import statistics
from collections import Counter

from . import logs, queries

EXAMPLES = 10


def _pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 3)


def collect(db, *, acked: dict[int, str], coordinators: list[int], faults: list,
            bound: float, reaper_interval: float, supervisor=None) -> dict:
    """Everything the verdict and the table need, from the run's database (and logs)."""
    status = {r["status"]: int(r["n"]) for r in db._all(queries.STATUS_COUNTS)}
    missing = db._all(queries.ACKED_NOT_DONE, {"ids": sorted(acked)})
    dup_done = db._all(queries.DUPLICATE_COMPLETIONS)
    effects = db._all(queries.EFFECTS)
    fan = db._all(queries.FAN_IN)
    fan_bad = [r for r in fan if r["children"] == 0 or r["unfinished"] > 0
               or (r["status"] == "done" and r["runs"] != 1) or r["completions"] > 1
               or (r["first_claim"] is not None and r["last_child_end"] is not None
                   and r["first_claim"] < r["last_child_end"])]
    by_start = db._all(queries.ORDER_BY_START)
    by_time = db._all(queries.ORDER_BY_TIME)
    keys = db._one(queries.ORDER_KEYS)
    latencies = [r["seconds"] for r in db._all(queries.LATENCY) if r["seconds"] is not None]
    events = {r["reason"]: int(r["n"]) for r in db._all(queries.EVENT_COUNTS)}
    audit = db.audit(reaper_interval=reaper_interval, examples=EXAMPLES)
    children = db._one(queries.CHILDREN_OF, {"ids": coordinators})["n"]
    lease_lost = logs.events(supervisor.children.values(), "lease_lost") if supervisor else []
    fault_rows = []
    for f in faults:
        rec = db._one(queries.RECOVERY, {"at": f.at, "lifted": f.at + f.seconds})
        fault_rows.append({"kind": f.kind, "at": round(f.at, 3), "seconds": f.seconds,
                           "detail": dict(f.detail),
                           "error": f.error,
                           "first_completion_s": _round(rec["first_completion"]),
                           "drained_s": _round(rec["drained"]), "pending_at_fault": rec["pending"]})
        if "worker" in f.detail:
            # What the stopped worker reported once it ran again, and was refused.
            fault_rows[-1]["detail"]["fenced_after_resume"] = sum(
                1 for e in lease_lost if e.get("worker") == f.detail["worker"])
    total = sum(status.values())
    return {
        "jobs": {"submitted": total, "acknowledged": len(acked),
                 "by_route": dict(Counter(acked.values())), "fan_out_children": int(children),
                 "done": status.get("done", 0), "failed": status.get("failed", 0),
                 "not_terminal": total - status.get("done", 0) - status.get("failed", 0),
                 "lost": len(missing),
                 "lost_examples": [{"id": r["id"], "status": r["status"] or "missing"}
                                   for r in missing[:EXAMPLES]]},
        "duplicates": {"accepted_completions": len(dup_done),
                       "completion_examples": [r["job_id"] for r in dup_done[:EXAMPLES]],
                       "transactional_effects": sum(1 for r in effects if r["n"] > 1),
                       "effect_anomalies": len(effects),
                       "effect_examples": [dict(r) for r in effects[:EXAMPLES]]},
        "effect_rows": dict(db._one(queries.EFFECT_ROWS)),
        "fan_in": {"coordinators": len(fan), "violations": len(fan_bad),
                   "examples": [r["id"] for r in fan_bad[:EXAMPLES]]},
        "ordering": {"keys": int(keys["keys"]), "jobs": int(keys["jobs"]),
                     "violations": len(by_start) + len(by_time),
                     "examples": [r["job_id"] for r in by_start[:EXAMPLES]]
                     + [r["id"] for r in by_time[:EXAMPLES]]},
        "slo": {"bound_seconds": bound, "jobs": len(latencies),
                "attainment": round(sum(1 for s in latencies if s <= bound) / len(latencies), 4)
                if latencies else None,
                "p50": _pct(latencies, 0.50), "p95": _pct(latencies, 0.95),
                "p99": _pct(latencies, 0.99), "max": _pct(latencies, 1.0),
                "mean": round(statistics.fmean(latencies), 3) if latencies else None},
        "events": events,
        "fencing": {"lease_lost": len(lease_lost),
                    "jb001": sum(1 for e in lease_lost if e.get("sqlstate") == "JB001")},
        "faults": fault_rows,
        "faults_injected": dict(Counter(f.kind for f in faults if f.error is None)),
        "audit": {"ok": all(int(r["violations"]) == 0 for r in audit),
                  "checks": [{"check": r["check_name"], "violations": int(r["violations"]),
                              "examples": list(r["example_job_ids"])} for r in audit]},
    }


def _round(value):
    return None if value is None else round(float(value), 3)


def judge(facts: dict) -> tuple[bool, list[str]]:
    """Exit-0 conditions; each failed one is a readable reason."""
    reasons = []
    jobs, dup = facts["jobs"], facts["duplicates"]
    if jobs["lost"]:
        reasons.append(f"{jobs['lost']} acknowledged job(s) lost or not terminal after the "
                       f"deadline, e.g. {jobs['lost_examples'][:5]}")
    if jobs.get("not_terminal"):
        reasons.append(f"{jobs['not_terminal']} job(s) not terminal after the deadline")
    if dup["accepted_completions"]:
        reasons.append(f"{dup['accepted_completions']} job(s) with more than one accepted "
                       f"completion, e.g. {dup['completion_examples'][:5]}")
    if dup["effect_anomalies"]:
        reasons.append(f"{dup['effect_anomalies']} transactional effect anomalies "
                       f"({dup['transactional_effects']} duplicated), e.g. "
                       f"{[e['job_id'] for e in dup['effect_examples'][:5]]}")
    if facts["fan_in"]["violations"]:
        reasons.append(f"{facts['fan_in']['violations']} fan-in coordinator(s) ran early, "
                       f"twice or never, e.g. {facts['fan_in']['examples'][:5]}")
    if facts["ordering"]["violations"]:
        reasons.append(f"{facts['ordering']['violations']} ordering-key violation(s), e.g. "
                       f"{facts['ordering']['examples'][:5]}")
    if not facts["audit"]["ok"]:
        bad = [f"{c['check']}={c['violations']}" for c in facts["audit"]["checks"] if c["violations"]]
        reasons.append("jobs.audit is not clean: " + ", ".join(bad))
    producer = facts.get("producer") or {}
    if producer.get("errors"):
        reasons.append(f"{producer['errors']} submit(s) refused unexpectedly, e.g. "
                       f"{producer['error_examples'][:2]}")
    failed_faults = [f for f in facts.get("faults", []) if f.get("error")]
    if failed_faults:
        reasons.append("fault(s) could not be injected: "
                       + "; ".join(f"{f['kind']}: {f['error']}" for f in failed_faults[:3]))
    return not reasons, reasons


def _fmt(value, unit="s") -> str:
    return "-" if value is None else f"{value:.2f}{unit}"


def render(report: dict) -> str:
    j, d, s = report["jobs"], report["duplicates"], report["slo"]
    attained = "-" if s["attainment"] is None else f"{100 * s['attainment']:.1f} %"
    rows = [
        ("submitted", f"{j['submitted']} ({j['acknowledged']} acknowledged + "
                      f"{j['fan_out_children']} fan-out children; by route {j['by_route']})"),
        ("done", j["done"]), ("failed", j["failed"]), ("lost", j["lost"]),
        ("duplicate accepted completions", d["accepted_completions"]),
        ("duplicate transactional effects", f"{d['transactional_effects']} (anomalies "
                                            f"{d['effect_anomalies']}; rows {report['effect_rows']})"),
        ("fan-in coordinators", f"{report['fan_in']['coordinators']} "
                                f"(violations {report['fan_in']['violations']})"),
        ("ordering keys", f"{report['ordering']['keys']} keys, {report['ordering']['jobs']} jobs "
                          f"(violations {report['ordering']['violations']})"),
        (f"SLO: terminal within {s['bound_seconds']}s", f"{attained} (p50 {_fmt(s['p50'])}, p95 "
                                                       f"{_fmt(s['p95'])}, p99 {_fmt(s['p99'])}, "
                                                       f"max {_fmt(s['max'])})"),
        ("stale reports fenced (JB001)", f"{report['fencing']['jb001']} (lease_lost lines "
                                         f"{report['fencing']['lease_lost']})"),
        ("events", report["events"]),
        ("process restarts", report.get("restarts", {})),
        ("producer", report.get("producer", {})),
        ("audit", "clean" if report["audit"]["ok"] else "VIOLATED"),
    ]
    lines = [
        f"chaos run ({report['profile']}, seed {report['seed']}): {report['wall_seconds']:.0f}s, "
        f"{report['settings']['workers']} workers, lease {report['settings']['lease']}s, "
        f"reaper every {report['settings']['reaper_interval']}s",
        "",
        f"{'figure':<32}  value",
        f"{'-' * 32}  -----",
    ] + [f"{label:<32}  {value}" for label, value in rows] + [
        "",
        "fault               at (s)  took   first done after  drained  detail",
        "------------------  ------  -----  ----------------  -------  ------",
    ]
    start = report["started_at"]
    for f in report["faults"]:
        detail = f["error"] or ", ".join(f"{k}={v}" for k, v in f["detail"].items())
        lines.append(f"{f['kind']:<18}  {f['at'] - start:>6.1f}  {f['seconds']:>4.1f}s  "
                     f"{_fmt(f['first_completion_s']):>16}  {_fmt(f['drained_s']):>7}  {detail}")
    lines.append("")
    lines.append("verdict: " + ("ok" if report["ok"] else "FAILED: " + "; ".join(report["reasons"])))
    return "\n".join(lines)
