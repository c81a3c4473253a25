"""The chaos run on the failover formation (``jobfence chaos --failover``): its database and
its Redis are the formation's (jobfence_chaos.formation), reached through the one multi-host
libpq URL and the one redis+sentinel URL every process takes, and three faults join the
others: ``pg_failover`` (the primary's machine lost: its keeper and postmaster get SIGKILL,
the monitor promotes the synchronous standby), ``pg_switchover`` (a planned one) and
``redis_failover`` (the Redis master killed, the sentinels promote the replica). After each,
the lost server comes back as a standby, so the next fault finds a whole formation."""

from __future__ import annotations

import shutil
import subprocess
import threading
import time
from pathlib import Path

import redis

from .formation import Formation, FormationError, _until, until_changed
from .servers import RedisChild, SetupError, repo_root

FAILOVER_KINDS = ("pg_failover", "pg_switchover", "redis_failover")
# The faults that act on servers the formation replaces: the machine's own cluster
# (pg_restart), one redis-server stopped and started in place (redis_restart,
# redis_down_submit), and the TCP proxy in front of a single host (network_stall).
NOT_ON_THE_FORMATION = ("pg_restart", "redis_restart", "redis_down_submit", "network_stall")
HEAL_TIMEOUT = 120.0


class FormationDatabase:
    """The run's database: the formation's ``jobfence``, deployed with sqitch on the primary.
    Dropped with the formation."""

    def __init__(self, formation: Formation):
        self.formation = formation
        self.name = "jobfence (failover formation)"

    @property
    def url(self) -> str:
        return self.formation.postgres.url()

    def create(self) -> None:
        sqitch, root = shutil.which("sqitch"), repo_root()
        if sqitch is None or root is None:
            raise SetupError("sqitch (and the repository's sqitch.plan) are needed to deploy "
                             "the run's database")
        primary = self.formation.postgres.node_url(self.formation.postgres.primary())
        done = subprocess.run([sqitch, "--quiet", "deploy", "db:pg://" + primary.split("://", 1)[1]],
                              cwd=root, capture_output=True, text=True)
        if done.returncode != 0:
            raise SetupError(f"sqitch deploy failed: {(done.stderr or done.stdout).strip()[:500]}")

    def drop(self) -> None:
        pass


class SentinelRedis(RedisChild):
    """The formation's Redis as the injectors see one: flushes and corruption go to the
    master of the moment; the URL is the sentinels'."""

    def __init__(self, formation: Formation):
        self.sentinels = formation.redis
        self.url = formation.redis.url
        self.proc = None

    @property
    def port(self) -> int:
        return self.sentinels.master()

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass


class Healer:
    """Brings a lost server back as a standby, in the background, and lets the next fault
    wait until the formation is whole again."""

    def __init__(self, formation: Formation):
        self.formation = formation
        self.threads: list[threading.Thread] = []
        self.errors: list[str] = []

    def later(self, fn) -> None:
        def run():
            try:
                fn()
            except (FormationError, redis.RedisError, OSError) as exc:
                self.errors.append(f"{type(exc).__name__}: {exc}")

        thread = threading.Thread(target=run, name="formation-healer", daemon=True)
        thread.start()
        self.threads.append(thread)

    def whole(self) -> None:
        for thread in self.threads:
            thread.join(HEAL_TIMEOUT)
        self.threads.clear()
        if self.errors:
            raise FormationError("; ".join(self.errors))
        _until(self.formation.postgres.healthy, HEAL_TIMEOUT, "pg_auto_failover to be whole", 0.5)


def pg_failover(stage) -> dict:
    pg, healer = stage.formation.postgres, stage.healer
    healer.whole()
    lost = pg.kill_primary()
    at = time.time()
    started = time.monotonic()
    new = until_changed(pg.primary, lost, 60, "the standby to take writes", 0.1)
    writable = time.monotonic() - started
    healer.later(lambda: pg.rejoin(lost))
    return {"lost": lost, "new_primary": new, "writable_after_s": round(writable, 2), "_at": at}


def pg_switchover(stage) -> dict:
    pg, healer = stage.formation.postgres, stage.healer
    healer.whole()
    before = pg.primary()
    started = time.monotonic()
    new = pg.switchover()
    return {"old_primary": before, "new_primary": new,
            "switched_after_s": round(time.monotonic() - started, 2)}


def redis_failover(stage) -> dict:
    sentinels, healer = stage.formation.redis, stage.healer
    healer.whole()
    lost = sentinels.kill_master()
    at = time.time()
    started = time.monotonic()
    new = until_changed(sentinels.master, lost, 30, "the sentinels to promote the replica", 0.1)
    promoted = time.monotonic() - started
    healer.later(lambda: sentinels.rejoin(lost, new))
    return {"lost_port": lost, "new_master_port": new, "promoted_after_s": round(promoted, 2),
            "_at": at}


def start_formation(workdir: Path, say) -> Formation:
    if shutil.which("pg_autoctl") is None:
        raise SetupError("pg_autoctl is not on PATH (Debian: postgresql-15-auto-failover; "
                         "scripts/setup --test installs it)")
    if shutil.which("redis-server") is None:
        raise SetupError("redis-server is not on PATH")
    # PostgreSQL's system account runs the servers: it must be able to reach its directory.
    workdir.parent.chmod(workdir.parent.stat().st_mode | 0o011)
    started = time.monotonic()
    try:
        formation = Formation(workdir).up()
    except FormationError as exc:
        raise SetupError(f"the failover formation did not start: {exc}") from None
    say(f"failover formation up in {time.monotonic() - started:.0f}s: pg_auto_failover "
        "(monitor, primary, synchronous standby), Redis Sentinel (master, replica, 3 sentinels)")
    return formation
