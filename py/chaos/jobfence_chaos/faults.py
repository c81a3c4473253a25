"""The fault injectors and their seeded schedule. Each injector does one thing to the running
system and returns what it did; the report later measures how the system recovered from the
moment it was injected (``at``, wall clock, comparable with PostgreSQL's timestamps on this
machine)."""

from __future__ import annotations

import random
import signal
import time
from dataclasses import dataclass, field

import psycopg
import psycopg_pool

from jobfence.client import Client
from jobfence.supervisor import Supervisor

from . import failover, queries
from .logs import worker_name
from .mix import Mix
from .proxy import StallProxy
from .servers import LocalPostgres, RedisChild

KINDS = ("kill_worker", "kill_reaper", "kill_relay", "sigstop_worker", "redis_flushall",
         "redis_restart", "redis_down_submit", "redis_corrupt", "pg_restart", "pg_terminate",
         "network_stall")


@dataclass
class Fault:
    kind: str
    at: float
    seconds: float = 0.0
    detail: dict = field(default_factory=dict)
    error: str | None = None
    submitted: list[int] = field(default_factory=list)   # ids the injector itself submitted


@dataclass
class Stage:
    """What the injectors act on."""

    supervisor: Supervisor
    redis: RedisChild
    postgres: LocalPostgres
    proxy: StallProxy
    db: object                 # jobfence.db.Database on the run's database (not proxied)
    database_url: str
    mix: Mix
    rng: random.Random
    lease: float
    reaper_interval: float
    formation: object = None   # jobfence_chaos.formation.Formation, with --failover
    healer: object = None      # jobfence_chaos.failover.Healer, with --failover


def kinds_for(postgres_restart: bool, on_formation: bool, only_failovers: bool = False) -> list[str]:
    """The fault kinds of a run. On the failover formation the three failovers join in and
    the faults that act on servers it replaces leave (failover.NOT_ON_THE_FORMATION);
    ``only_failovers`` keeps the failovers and a worker kill (a short proof)."""
    if on_formation:
        if only_failovers:
            return list(failover.FAILOVER_KINDS)
        return [k for k in KINDS if k not in failover.NOT_ON_THE_FORMATION] + list(failover.FAILOVER_KINDS)
    return [k for k in KINDS if postgres_restart or k != "pg_restart"]


def schedule(rng: random.Random, rounds: int, kinds: list[str]) -> list[str]:
    """Every kind once per round, in a seeded order; a second worker kill per round because
    workers are the processes that hold leases."""
    plan: list[str] = []
    for _ in range(rounds):
        one = kinds + ["kill_worker"]
        rng.shuffle(one)
        plan += one
    return plan


def _past_lease(stage: Stage) -> float:
    # Long enough for the lease to expire and the reaper to take it back: lease + two ticks.
    return stage.lease + 2 * stage.reaper_interval + 0.5


def _kill(stage: Stage, role: str) -> dict:
    member = stage.rng.choice(stage.supervisor.role(role))
    pid = stage.supervisor.send(member.name, signal.SIGKILL)
    return {"process": member.name, "pid": pid}


def kill_worker(stage: Stage) -> dict:
    return _kill(stage, "worker")


def kill_reaper(stage: Stage) -> dict:
    return _kill(stage, "reaper")


def kill_relay(stage: Stage) -> dict:
    return _kill(stage, "relay")


def _busiest_worker(stage: Stage):
    held = {r["owned_by"]: r["n"] for r in stage.db._all(queries.HELD_BY_WORKER)}
    workers = stage.supervisor.role("worker")
    return max(workers, key=lambda m: (held.get(worker_name(m), 0),
                                       stage.rng.random())), held


def sigstop_worker(stage: Stage) -> dict:
    # Work that outlives the pause, so the stopped worker holds leases when it stops and
    # reports (or heartbeats) them, stale, when it continues.
    with Client(stage.database_url, stage.redis.url, pool_size=1, timeout=5.0) as client:
        ids = client.submit_many([{"kind": "chaos_effect", "payload": {"seconds": 0.5},
                                   "idempotency_key": stage.mix.key()} for _ in range(12)])
    time.sleep(0.4)
    member, held = _busiest_worker(stage)
    name = worker_name(member)
    stopped_at = time.time()
    stage.supervisor.send(member.name, signal.SIGSTOP)
    try:
        time.sleep(_past_lease(stage))
    finally:
        stage.supervisor.send(member.name, signal.SIGCONT)
    return {"process": member.name, "worker": name, "held_at_stop": held.get(name, 0),
            "_at": stopped_at, "ids": ids}


def redis_flushall(stage: Stage) -> dict:
    stage.redis.flushall()
    return {}


def redis_restart(stage: Stage) -> dict:
    stage.redis.stop()
    time.sleep(1.0)
    stage.redis.start()
    return {}


def redis_corrupt(stage: Stage) -> dict:
    # Workers must skip the bad members and keep popping; the reaper deletes the wrong-type
    # key and re-pushes, from PostgreSQL, the delayed signals that went with it.
    from .workload import app

    return stage.redis.corrupt(app.default_queue, stage.db.redis_namespace())


def redis_down_submit(stage: Stage) -> dict:
    stage.redis.stop()
    try:
        with Client(stage.database_url, stage.redis.url, pool_size=1, timeout=5.0) as client:
            ids = client.submit_many(stage.mix.batch(20))
        parked = stage.db._one(queries.COUNT_PARKED, {"ids": ids})["n"]
        time.sleep(1.0)
    finally:
        stage.redis.start()
    return {"submitted_while_down": len(ids), "parked_enqueue_failed": int(parked), "ids": ids}


def pg_restart(stage: Stage) -> dict:
    error = stage.postgres.restart()
    if error:
        raise RuntimeError(f"pg_ctlcluster restart failed: {error}")
    return {"cluster": f"{stage.postgres.version}/main"}


def pg_terminate(stage: Stage) -> dict:
    rows = stage.db._all(queries.TERMINATE_BACKENDS)
    return {"terminated": {r["application_name"]: r["n"] for r in rows}}


def network_stall(stage: Stage) -> dict:
    stage.proxy.pause()
    try:
        time.sleep(_past_lease(stage))
    finally:
        stage.proxy.resume()
    return {"stalled_seconds": round(_past_lease(stage), 2)}


INJECTORS = {**{k: globals()[k] for k in KINDS},
             **{k: getattr(failover, k) for k in failover.FAILOVER_KINDS}}


def inject(stage: Stage, kind: str) -> Fault:
    fault = Fault(kind, time.time())
    started = time.monotonic()
    try:
        # A fault right after a PostgreSQL restart may find the server still starting.
        fault.detail = _retrying(lambda: INJECTORS[kind](stage))
        # The moment of the fault itself, when an injector prepares something first.
        at = fault.detail.pop("_at", None)
        fault.submitted = fault.detail.pop("ids", [])
        if at is not None:
            started += at - fault.at
            fault.at = at
    except Exception as exc:  # noqa: BLE001 - one fault failing must not end the run
        fault.error = f"{type(exc).__name__}: {exc}"
    fault.seconds = round(time.monotonic() - started, 3)
    return fault


def _retrying(fn, attempts: int = 20):
    for n in range(attempts):
        try:
            return fn()
        except (psycopg.OperationalError, psycopg_pool.PoolTimeout):
            if n == attempts - 1:
                raise
            time.sleep(0.5)


__all__ = ["Fault", "Stage", "inject", "schedule", "KINDS"]
