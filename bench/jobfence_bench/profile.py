"""A py-spy profile of one worker of the judged configuration, taken in an extra window after
the timed ones (sampling slows the process it samples, so it never overlaps a measurement).
Only with `bench/run --profile` and py-spy on PATH (or JOBFENCE_BENCH_PYSPY)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections import Counter
from pathlib import Path

from .common import RESULTS, progress


def pyspy() -> str | None:
    return os.environ.get("JOBFENCE_BENCH_PYSPY") or shutil.which("py-spy")


def _short(frame: str) -> str:
    # "func (path/to/module.py:123)" -> "func (module.py)"; line numbers would split a
    # function's samples over its lines.
    m = re.match(r"(.*?) \((.*?)(?::\d+)?\)$", frame.strip())
    if not m:
        return frame.strip()
    return f"{m.group(1)} ({Path(m.group(2)).name})"


def record(targets: dict[str, int], seconds: float) -> dict:
    """py-spy every pid in `targets` ({tag: pid}) over the same `seconds`."""
    return finish(start(targets, seconds), seconds)


def start(targets: dict[str, int], seconds: float) -> dict:
    """Start py-spy on every pid in `targets` ({tag: pid}) for `seconds`, without waiting:
    `finish` collects the profiles."""
    exe = pyspy()
    if not exe:
        return {tag: None for tag in targets}
    RESULTS.mkdir(parents=True, exist_ok=True)
    runs = {}
    for tag, pid in targets.items():
        raw = RESULTS / f"profile-{tag}.txt"
        raw.unlink(missing_ok=True)
        runs[tag] = (raw, subprocess.Popen(
            [exe, "record", "--pid", str(pid), "--duration", str(max(1, round(seconds))), "--rate", "200",
             "--format", "raw", "--output", str(raw), "--nonblocking"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))
    return runs


def finish(runs: dict, seconds: float) -> dict:
    out = {}
    for tag, run in runs.items():
        if run is None:
            out[tag] = {"skipped": "py-spy not found"}
            continue
        raw, proc = run
        try:
            _, err = proc.communicate(timeout=seconds + 60)
        except subprocess.TimeoutExpired:
            proc.kill()
            err = "timed out"
        out[tag] = summarise(raw, seconds) if raw.exists() else {"skipped": f"py-spy failed: {err.strip()[-300:]}"}
    return out


def summarise(raw: Path, seconds: float) -> dict:
    self_time, total_time, samples = Counter(), Counter(), 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        n = int(count)
        samples += n
        frames = [_short(f) for f in stack.split(";") if f and not f.startswith("thread ")
                  and not f.startswith("process ")]
        if not frames:
            continue
        self_time[frames[-1]] += n
        for f in set(frames):
            total_time[f] += n
    progress(f"profile: {samples} samples in {raw.relative_to(RESULTS.parents[1])}")
    # Without --idle py-spy leaves out threads it sees sleeping; a thread blocked inside
    # psycopg's wait on PostgreSQL still counts, so this is "busy or waiting on the server".
    return {"file": str(raw.relative_to(RESULTS.parents[1])), "samples": samples,
            "busy_share": samples / (200 * max(1, round(seconds))),
            "self": [(f, n / samples) for f, n in self_time.most_common(25)],
            "total": [(f, n / samples) for f, n in total_time.most_common(40)]}
