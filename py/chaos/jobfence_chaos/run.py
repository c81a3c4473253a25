"""One chaos run: its own database and redis-server, the real processes, the workload, the
faults on a seeded schedule, quiescence, then the report. Whatever happens — an error, ctrl+c,
SIGTERM — the ``finally`` leaves PostgreSQL running, and stops the processes, the proxy and
the redis-server it started."""

from __future__ import annotations

import logging
import os
import random
import shutil
import signal
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from urllib.parse import urlsplit

import psycopg
import psycopg_pool

from jobfence.db import Database
from jobfence.supervisor import Child, Supervisor

from . import faults as F
from . import logs, queries, report
from .mix import Mix
from .producer import Producer
from .proxy import StallProxy
from .failover import FormationDatabase, Healer, SentinelRedis, start_formation
from .servers import LocalPostgres, RedisChild, ScratchDatabase, free_port, wait_for, with_port
from .workload import LEASE_ENV, RETRIES_ENV, app, create_tables

# A child that died is started again after this long: the faults kill on purpose, and the
# run measures recovery, not the restart policy of `jobfence run`.
RESTART_DELAY = 0.3

APP_REF = "jobfence_chaos.workload:app"


@dataclass(frozen=True)
class Profile:
    name: str
    workers: int
    rate: float                 # plain jobs per second (families come on top)
    families_per_second: float
    rounds: int                 # every fault kind once per round
    gap: tuple[float, float]    # seconds between faults
    quiesce: float              # deadline for every job to be terminal
    lease: float = 1.5
    reaper_interval: float = 0.5
    slowest_handler: float = 1.0
    retries: int = 8            # enough that faults alone never exhaust a job

    @property
    def bound(self) -> float:
        # A job hit by a lost lease waits out the lease, then at most one reaper tick, then
        # runs again (at most the slowest handler): the scaled latency bound.
        return round(self.lease + self.reaper_interval + self.slowest_handler, 2)


PROFILES = {
    "quick": Profile("quick", workers=3, rate=40, families_per_second=2, rounds=1,
                     gap=(2.5, 4.0), quiesce=60),
    "long": Profile("long", workers=4, rate=90, families_per_second=4, rounds=4,
                    gap=(3.0, 6.0), quiesce=180),
}


class Interrupted(BaseException):
    """SIGTERM or SIGINT: a BaseException, so that no injector's error handling swallows it
    and the run goes straight to its clean-up."""


def _on_signal(signum, _frame):
    raise Interrupted(f"interrupted by signal {signum}")


class ChaosRun:
    def __init__(self, profile: Profile, *, admin_url: str, seed: int, postgres_restart: bool,
                 keep: bool, say, failover: bool = False, only_failovers: bool = False):
        self.p = profile
        self.failover = failover
        self.only_failovers = only_failovers
        self.formation = None
        self.admin_url = admin_url
        self.seed = seed
        self.postgres_restart = postgres_restart
        self.keep = keep
        self.say = say
        self.rng = random.Random(seed)
        self.workdir = Path(tempfile.mkdtemp(prefix="jobfence-chaos-"))
        # With --failover the run's database and Redis are the formation's (run()).
        self.scratch = None if failover else ScratchDatabase(admin_url)
        self.postgres = LocalPostgres(admin_url)
        self.redis: RedisChild | None = None
        self.proxy: StallProxy | None = None
        self.supervisor = Supervisor(restart_delay=lambda child, now: RESTART_DELAY, poll=0.05,
                                     log=logging.getLogger("jobfence.chaos"))
        self.db: Database | None = None
        self.producer: Producer | None = None
        self.ok = False

    # -- setup ------------------------------------------------------------------------------
    def _env(self, database_url: str) -> dict:
        env = dict(os.environ, JOBFENCE_DATABASE_URL=database_url,
                   JOBFENCE_REDIS_URL=self.redis.url, JOBFENCE_LOG_LEVEL="INFO")
        env[LEASE_ENV] = str(self.p.lease)
        env[RETRIES_ENV] = str(self.p.retries)
        env.pop("JOBFENCE_API_TOKENS", None)
        return env

    def _declare(self) -> None:
        for task in app.tasks.values():
            options = dict(task.options, lease_timeout=self.p.lease, max_retries=self.p.retries)
            self.db.define_type(task.kind, **options)
        with self.db.connection() as conn:
            create_tables(conn)

    def _add(self, name: str, role: str, argv, env: dict) -> Child:
        """A jobfence process of the run, logging JSON lines to its own file."""
        prefix = [sys.executable, "-m", "jobfence", "--log-format", "json"]
        return self.supervisor.add(Child(name, lambda g: prefix + argv(g), env, role=role,
                                         log_path=self.workdir / f"{name}.log"))

    def _processes(self) -> str:
        url = self.scratch.url
        parts = urlsplit(url)
        direct = self._env(url)
        if self.failover:
            # The proxy fronts one host; the workers take the formation's multi-host URL.
            through_proxy = direct
        else:
            self.proxy = StallProxy(parts.hostname or "127.0.0.1", parts.port or 5432)
            through_proxy = self._env(with_port(url, "127.0.0.1", self.proxy.start()))
        api_port = free_port()
        sup, interval = self.supervisor, str(self.p.reaper_interval)
        self._add("relay", "relay", lambda g: ["relay", "--app", APP_REF, "--poll-interval",
                                               interval, "--stale-after", "1"], direct)
        self._add("reaper", "reaper", lambda g: ["reaper", "--app", APP_REF, "--interval",
                                                 interval, "--stale-after", "1"], direct)
        self._add("api", "api", lambda g: ["api", "--no-auth", "--port", str(api_port),
                                           "--pool-size", "4"], direct)
        for n in range(1, self.p.workers + 1):
            name = f"w{n}"
            self._add(name, "worker",
                      lambda g, name=name: ["worker", "--app", APP_REF, "--name", f"{name}.g{g}",
                                            "--concurrency", "8", "--batch", "20",
                                            "--prefetch", "4", "--pop-timeout", "0.2",
                                            "--grace", "2", "--no-declare"], through_proxy)
        sup.start()

        def seen(event: str) -> list[dict]:
            return logs.events(sup.children.values(), event)

        ready = wait_for(lambda: len(seen("worker_ready")) >= self.p.workers
                         and seen("reaper_ready") and seen("api_listening")
                         and seen("relay_listening"), 60, 0.2)
        if not ready:
            raise RuntimeError(
                f"the processes did not become ready in 60 s; logs in {self.workdir}")
        return f"http://127.0.0.1:{api_port}"

    # -- phases -----------------------------------------------------------------------------
    def _inject_all(self, plan: list[str], stage: F.Stage) -> list[F.Fault]:
        done = []
        for n, kind in enumerate(plan, 1):
            time.sleep(self.rng.uniform(*self.p.gap))
            fault = F.inject(stage, kind)
            done.append(fault)
            extra = fault.error or ", ".join(f"{k}={v}" for k, v in fault.detail.items()
                                             if k != "ids")
            self.say(f"fault {n}/{len(plan)} {kind} ({fault.seconds:.1f}s)"
                     + (f" {extra}" if extra else "")
                     + f"; {len(self.producer.acked)} jobs acknowledged so far")
        return done

    def _quiesce(self) -> float:
        deadline = time.monotonic() + self.p.quiesce
        started = time.monotonic()
        last_say = 0.0
        while time.monotonic() < deadline:
            try:
                left = int(self.db._one(queries.NOT_TERMINAL)["n"])
            except (psycopg.OperationalError, psycopg_pool.PoolTimeout):
                left = -1
            if left == 0:
                return time.monotonic() - started
            if time.monotonic() - last_say > 3:
                self.say(f"waiting for quiescence: {left} job(s) not terminal")
                last_say = time.monotonic()
            time.sleep(0.25)
        return time.monotonic() - started

    def run(self) -> dict:
        t0 = time.time()
        old = {s: signal.signal(s, _on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
        try:
            if self.failover:
                self.formation = start_formation(self.workdir / "ha", self.say)
                self.scratch = FormationDatabase(self.formation)
                self.redis = SentinelRedis(self.formation)
            self.say(f"chaos {self.p.name}: seed {self.seed}, database {self.scratch.name}, "
                     f"logs in {self.workdir}")
            self.scratch.create()
            if not self.failover:
                self.redis = RedisChild(self.workdir)
                self.redis.start()
            self.db = Database(self.scratch.url, max_size=2, name="jobfence-chaos", timeout=10.0,
                               open_timeout=10)
            self._declare()
            api_url = self._processes()
            restart_ok = (not self.failover and self.postgres_restart
                          and self.postgres.why_not() is None)
            if self.postgres_restart and not self.failover and not restart_ok:
                self.say(f"no PostgreSQL restart: {self.postgres.why_not()}")
            plan = F.schedule(self.rng, self.p.rounds,
                              F.kinds_for(restart_ok, self.failover, self.only_failovers))
            mix = Mix(random.Random(self.seed + 1), f"s{self.seed}")
            self.producer = Producer(mix, self.scratch.url, self.redis.url, api_url,
                                     rate=self.p.rate,
                                     families_per_tick=self.p.families_per_second * 0.25)
            stage = F.Stage(self.supervisor, self.redis, self.postgres, self.proxy, self.db,
                            self.scratch.url, Mix(random.Random(self.seed + 2), f"f{self.seed}"),
                            random.Random(self.seed + 3), self.p.lease, self.p.reaper_interval,
                            self.formation, Healer(self.formation) if self.failover else None)
            expected = sum(self.p.gap) / 2 * len(plan) + 3 * len(plan)
            self.say(f"{self.p.workers} workers, reaper, relay and API up; {len(plan)} faults "
                     f"planned over about {expected:.0f}s: {', '.join(plan)}")
            self.producer.start(seconds=10 * expected, give_up_after=self.p.quiesce)
            warm = time.monotonic()
            wait_for(lambda: len(self.producer.acked) > 50, 10)
            self.say(f"workload running ({time.monotonic() - warm:.1f}s warm-up)")
            injected = self._inject_all(plan, stage)
            for fault in injected:
                self.producer.acked.update((job_id, "fault") for job_id in fault.submitted)
            time.sleep(2.0)  # some workload after the last fault, to see the system recover
            self.producer.stop()
            self.producer.join(self.p.quiesce)
            self.say(f"workload stopped: {len(self.producer.acked)} jobs acknowledged, "
                     f"{self.producer.retries} submit retries, {len(self.producer.errors)} "
                     "submit errors; waiting for quiescence")
            quiet = self._quiesce()
            self.say(f"quiet after {quiet:.1f}s; reading the history")
            facts = F._retrying(lambda: report.collect(
                self.db, acked=dict(self.producer.acked),
                coordinators=list(self.producer.coordinators), faults=injected,
                bound=self.p.bound, reaper_interval=self.p.reaper_interval,
                supervisor=self.supervisor))
            facts["jobs"]["unacknowledged"] = self.producer.unacked
            facts["producer"] = {"submit_retries": self.producer.retries,
                                 "errors": len(self.producer.errors),
                                 "error_examples": self.producer.errors[:5]}
            facts["restarts"] = {c.name: len(c.restarted_at) for c in self.supervisor.children.values()}
            facts["quiescence_seconds"] = round(quiet, 2)
            facts["failover"] = self.failover
            ok, reasons = report.judge(facts)
            self.ok = ok
            facts.update(ok=ok, reasons=reasons, profile=self.p.name, seed=self.seed,
                         started_at=round(t0, 3), wall_seconds=round(time.time() - t0, 1),
                         database=self.scratch.name, kept=self.keep,
                         logs=str(self.workdir) if self.keep or not ok else None,
                         settings={**asdict(self.p), "bound_seconds": self.p.bound,
                                   "postgres_restart": restart_ok})
            return facts
        finally:
            self._cleanup()
            for s, handler in old.items():
                signal.signal(s, handler)

    def _keep_logs(self) -> bool:
        # The logs of a failed run are kept: they are what explains it (a run that failed
        # before starting any process has none).
        return self.keep or (not self.ok and any(self.workdir.glob("*.log")))

    def _cleanup(self) -> None:
        # Signals are ignored from here on: a second ctrl+c must not cut the clean-up short.
        for s in (signal.SIGTERM, signal.SIGINT):
            signal.signal(s, signal.SIG_IGN)
        steps = [lambda: self.postgres.ensure_running(),
                 lambda: self.producer and self.producer.stop(),
                 lambda: self.proxy and self.proxy.resume(),
                 lambda: self.supervisor.stop_all(grace=5.0),
                 lambda: self.formation and self.formation.down(remove=False),
                 lambda: self.producer and self.producer.close(),
                 lambda: self.db and self.db.close(),
                 lambda: self.proxy and self.proxy.close(),
                 lambda: self.redis and self.redis.stop(),
                 lambda: None if self.keep or self.scratch is None else self.scratch.drop(),
                 lambda: None if self._keep_logs() else shutil.rmtree(self.workdir,
                                                                     ignore_errors=True),
                 lambda: self.postgres.ensure_running()]
        for step in steps:
            try:
                step()
            except Exception as exc:  # noqa: BLE001 - every step runs, whatever failed before
                print(f"chaos: clean-up step failed: {exc}", file=sys.stderr)
