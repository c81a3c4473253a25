"""What the observability costs on the hot path: the SQL path (submit_many -> claim_many ->
complete_many, one connection) against a twin database whose jobs.tally does nothing,
rounds alternating between the two so both see the same machine. The figure is backend CPU
per job read from /proc (the server runs here), which the noisy neighbours of a shared
machine disturb far less than wall time."""

from __future__ import annotations

import os
import subprocess

from psycopg.types.json import Jsonb

from .common import ROOT, Settings, connect, figure, progress

TICK = os.sysconf("SC_CLK_TCK")
# The same signature, the same rights, no work: what the transitions would cost without it.
STUB = """
CREATE OR REPLACE FUNCTION jobs.tally(kinds text[], reasons text[], expired boolean[] DEFAULT NULL,
    waits double precision[] DEFAULT NULL, runs double precision[] DEFAULT NULL,
    latencies double precision[] DEFAULT NULL, retries integer[] DEFAULT NULL,
    job_ids bigint[] DEFAULT NULL)
RETURNS integer LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp SET jit = off
AS $$ BEGIN RETURN 0; END $$
"""


def _cpu_seconds(pid: int) -> float:
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def _twin(settings: Settings) -> str:
    server, name = settings.url.rsplit("/", 1)
    twin = f"{name}_notally"
    with connect(f"{server}/postgres") as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{twin}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{twin}"')
    target = "db:pg://" + f"{server}/{twin}".split("://", 1)[1]
    subprocess.run(["sqitch", "--quiet", "deploy", target], cwd=ROOT, check=True,
                   capture_output=True)
    with connect(f"{server}/{twin}") as conn:
        conn.execute(STUB)
        conn.execute("SELECT jobs.define_type('bench')")
    return f"{server}/{twin}"


def _drop(url: str) -> None:
    server, name = url.rsplit("/", 1)
    with connect(f"{server}/postgres") as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _round(conn, specs) -> None:
    ids = [r[0] for r in conn.execute("SELECT id FROM jobs.submit_many(%s)", (specs,)).fetchall()]
    leases = conn.execute("SELECT job_id, lease_version FROM jobs.claim_many(%s, 'bench')",
                          (ids,)).fetchall()
    conn.execute("SELECT * FROM jobs.complete_many(%s, 'bench', %s, %s)",
                 ([l[0] for l in leases], [l[1] for l in leases], [Jsonb({})] * len(leases))).fetchall()


def run(settings: Settings, admin) -> dict:
    twin = _twin(settings)
    batch = 100
    rounds = 60 if settings.quick else 200
    specs = Jsonb([{"kind": "bench", "payload": {"n": i}} for i in range(batch)])
    overheads, with_us, without_us = [], [], []
    try:
        with connect(settings.url) as real, connect(twin) as stub:
            for conn in (real, stub):
                conn.execute("SET synchronous_commit = off")  # CPU, not the disk, is measured
                for _ in range(10):
                    _round(conn, specs)
            for rep in range(settings.reps):
                spent = {"real": 0.0, "stub": 0.0}
                for r in range(rounds):
                    pair = (("real", real), ("stub", stub)) if r % 2 else (("stub", stub), ("real", real))
                    for name, conn in pair:
                        before = _cpu_seconds(conn.info.backend_pid)
                        _round(conn, specs)
                        spent[name] += _cpu_seconds(conn.info.backend_pid) - before
                jobs = rounds * batch
                with_us.append(spent["real"] / jobs * 1e6)
                without_us.append(spent["stub"] / jobs * 1e6)
                overheads.append(spent["real"] / spent["stub"] - 1 if spent["stub"] else None)
    finally:
        _drop(twin)
    out = {"batch": batch, "backend_cpu_us_per_job": figure(with_us, "µs"),
           "without_tally_us_per_job": figure(without_us, "µs"),
           "overhead": figure(overheads, "fraction")}
    progress(f"observe: {out['backend_cpu_us_per_job']['median']:.0f} µs backend CPU per job with "
             f"the rollup, {out['without_tally_us_per_job']['median']:.0f} without "
             f"(+{out['overhead']['median']:.1%})")
    return out
