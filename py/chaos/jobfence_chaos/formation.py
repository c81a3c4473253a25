"""A highly available formation on loopback, for failover runs (docs/operations.md,
"Failover"): PostgreSQL under pg_auto_failover (a monitor, a primary and a synchronous
standby) and Redis under Sentinel (a master, a replica, three sentinels with quorum 2).

Every server runs from one work directory, on free ports, as PostgreSQL's system account
when started by root (PostgreSQL refuses root). ``state.json`` there says what runs, so
``scripts/ha status`` and ``scripts/ha down`` can act on a formation another process
started. Nothing here touches the machine's own PostgreSQL or Redis.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import psycopg
import redis

from .servers import free_port

ACCOUNT = "postgres"
BIN = Path("/usr/lib/postgresql") / (sorted(os.listdir("/usr/lib/postgresql"))[-1]
                                     if os.path.isdir("/usr/lib/postgresql") else "15") / "bin"
SERVICE = "jobfence"
DATABASE = "jobfence"
# Fast enough for a test, and said in docs/operations.md: the monitor probes every second,
# gives up on a node after 3 s, and waits 5 s for a lost primary to demote itself before
# the standby takes writes (the default, 30 s, guards against a primary that is only cut off).
MONITOR_SETTINGS = {
    "pgautofailover.health_check_period": 1000,
    "pgautofailover.health_check_timeout": 1000,
    "pgautofailover.health_check_max_retries": 1,
    "pgautofailover.health_check_retry_delay": 500,
    "pgautofailover.node_considered_unhealthy_timeout": 3000,
    "pgautofailover.primary_demote_timeout": 5000,
}


class FormationError(RuntimeError):
    """The formation could not be started or changed (the message says which server)."""


def _as_account(command: list[str]) -> list[str]:
    return ["runuser", "-u", ACCOUNT, "--"] + command if os.geteuid() == 0 else command


def _until(predicate, timeout: float, what: str, interval: float = 0.2):
    deadline = time.monotonic() + timeout
    while True:
        try:
            found = predicate()
        except (psycopg.Error, redis.RedisError, OSError, ValueError, FormationError):
            found = None
        if found:
            return found
        if time.monotonic() > deadline:
            raise FormationError(f"timed out waiting for {what}")
        time.sleep(interval)


def until_changed(read, old, timeout: float, what: str, interval: float = 0.2):
    """Poll ``read()`` until it answers something other than ``old`` (and not None): the new
    primary, the new master."""
    def changed():
        now = read()
        return now if now not in (None, old) else None

    return _until(changed, timeout, what, interval)


class PostgresHA:
    """pg_auto_failover: a monitor, then two nodes; the first becomes the primary, the
    second its synchronous standby (synchronous_standby_names = ANY 1)."""

    def __init__(self, workdir: Path, ports: dict | None = None):
        self.dir = workdir
        self.ports = ports or {"monitor": free_port(), "node1": free_port(), "node2": free_port()}
        self.user = ACCOUNT if os.geteuid() == 0 else os.environ.get("USER", ACCOUNT)
        self.env = dict(os.environ, XDG_CONFIG_HOME=str(workdir / "config"),
                        XDG_DATA_HOME=str(workdir / "share"), PG_CONFIG=str(BIN / "pg_config"))

    # -- URLs ------------------------------------------------------------------------------
    def node_url(self, node: str, dbname: str = DATABASE) -> str:
        return f"postgresql://{self.user}@127.0.0.1:{self.ports[node]}/{dbname}"

    def url(self, dbname: str = DATABASE) -> str:
        """The one URL every process takes: both nodes, the writable one chosen by libpq."""
        hosts = ",".join(f"127.0.0.1:{self.ports[n]}" for n in ("node1", "node2"))
        return (f"postgresql://{self.user}@{hosts}/{dbname}"
                "?target_session_attrs=read-write&connect_timeout=2")

    @property
    def monitor_admin_url(self) -> str:
        """The monitor's database as this formation's superuser (settings, node states)."""
        return f"postgresql://{self.user}@127.0.0.1:{self.ports['monitor']}/pg_auto_failover"

    @property
    def monitor_url(self) -> str:
        return f"postgres://autoctl_node@127.0.0.1:{self.ports['monitor']}/pg_auto_failover?sslmode=disable"

    # -- processes -------------------------------------------------------------------------
    def _autoctl(self, *args: str, timeout: float = 120) -> str:
        done = subprocess.run(_as_account(["pg_autoctl", *args]), env=self.env, capture_output=True,
                              text=True, timeout=timeout)
        if done.returncode != 0:
            raise FormationError(f"pg_autoctl {args[0]} {args[1] if len(args) > 1 else ''}: "
                                 f"{(done.stderr or done.stdout).strip()[-800:]}")
        return done.stdout

    def _run(self, name: str) -> None:
        """``pg_autoctl run`` for one server, detached: it keeps its PostgreSQL up and talks
        to the monitor; its pid goes to the work directory."""
        log = open(self.dir / f"{name}.log", "a")
        try:
            proc = subprocess.Popen(_as_account(["pg_autoctl", "run", "--pgdata", str(self.dir / name)]),
                                    env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True)
        finally:
            log.close()
        (self.dir / f"{name}.keeper.pid").write_text(str(proc.pid))

    def start(self) -> "PostgresHA":
        self.dir.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            shutil.chown(self.dir, ACCOUNT)
        common = ["--pgctl", str(BIN / "pg_ctl"), "--auth", "trust", "--no-ssl", "--hostname", "127.0.0.1"]
        self._autoctl("create", "monitor", "--pgdata", str(self.dir / "monitor"),
                      "--pgport", str(self.ports["monitor"]), *common)
        self._run("monitor")
        admin = self.monitor_admin_url
        _until(lambda: psycopg.connect(admin, connect_timeout=2).close() or True, 30, "the monitor")
        with psycopg.connect(admin, autocommit=True) as conn:
            for name, value in MONITOR_SETTINGS.items():
                conn.execute(f"ALTER SYSTEM SET {name} = {int(value)}")
            conn.execute("SELECT pg_reload_conf()")
        for node in ("node1", "node2"):
            self._autoctl("create", "postgres", "--pgdata", str(self.dir / node),
                          "--pgport", str(self.ports[node]), "--monitor", self.monitor_url,
                          "--dbname", DATABASE, "--name", node, *common)
            self._run(node)
            if node == "node1":
                _until(lambda: self.states().get("node1") == ("primary", "primary")
                       or self.states().get("node1") == ("single", "single"), 60, "the first node")
            else:
                # pg_basebackup waits for a checkpoint (spread: minutes); ask for it now.
                def caught_up():
                    with psycopg.connect(self.node_url("node1"), autocommit=True, connect_timeout=2) as c:
                        c.execute("CHECKPOINT")
                    return self.states().get("node2") == ("secondary", "secondary")

                _until(caught_up, 120, "the standby to catch up", interval=1.0)
        _until(lambda: self.synchronous(), 30, "synchronous replication")
        return self

    def synchronous(self) -> bool:
        primary = self.primary()
        with psycopg.connect(self.node_url(primary), autocommit=True, connect_timeout=2) as conn:
            return conn.execute("SHOW synchronous_standby_names").fetchone()[0] not in ("", None)

    def states(self) -> dict[str, tuple[str, str]]:
        """node name -> (reported state, assigned state), as the monitor has them."""
        with psycopg.connect(self.monitor_admin_url, autocommit=True, connect_timeout=2) as conn:
            rows = conn.execute("SELECT nodename, reportedstate::text, goalstate::text "
                                "FROM pgautofailover.node").fetchall()
        return {name: (reported, goal) for name, reported, goal in rows}

    def primary(self) -> str:
        """The node that takes writes now (asked of each node, not of the monitor)."""
        for node in ("node1", "node2"):
            try:
                with psycopg.connect(self.node_url(node), autocommit=True, connect_timeout=2) as conn:
                    if conn.execute("SELECT NOT pg_is_in_recovery() AND "
                                    "current_setting('transaction_read_only') = 'off'").fetchone()[0]:
                        return node
            except psycopg.Error:
                continue
        raise FormationError("no node takes writes")

    def _kill_tree(self, node: str) -> None:
        # The keeper leads a process group of its own (its PostgreSQL included); the
        # postmaster is killed by its pid too, in case it left the group.
        keeper = self.dir / f"{node}.keeper.pid"
        if keeper.exists():
            try:
                os.killpg(int(keeper.read_text()), signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        postmaster = self.dir / node / "postmaster.pid"
        if postmaster.exists():
            try:
                os.kill(int(postmaster.read_text().split()[0]), signal.SIGKILL)
            except (ProcessLookupError, ValueError):
                pass

    def kill_primary(self) -> str:
        """The loss of the primary's machine: its keeper and its postmaster get SIGKILL, so
        nothing restarts it locally; the monitor promotes the standby. Returns the node."""
        # Right after a switchover the new primary may not take writes yet: wait for it.
        node = _until(self.primary, 30, "a primary that takes writes", 0.1)
        self._kill_tree(node)
        return node

    def rejoin(self, node: str) -> None:
        """The lost node comes back: its keeper rewinds it and it follows the new primary."""
        self._run(node)

    def switchover(self) -> str:
        """A planned switchover (the standby becomes the primary); returns the new primary."""
        before = self.primary()
        self._autoctl("perform", "switchover", "--monitor", self.monitor_url, "--wait", "60",
                      timeout=90)
        return until_changed(self.primary, before, 60, "the switchover")

    def healthy(self) -> bool:
        """Both nodes in their place, as the monitor says, and the primary taking writes."""
        states = self.states()
        return (sorted(s[0] for s in states.values()) == ["primary", "secondary"]
                and all(reported == goal for reported, goal in states.values())
                and bool(self.primary()))

    def stop(self) -> None:
        for node in ("node1", "node2", "monitor"):
            self._kill_tree(node)


class RedisSentinels:
    """A Redis master, one replica and three sentinels (quorum 2) that fail over in about a
    second and a half."""

    def __init__(self, workdir: Path, ports: dict | None = None):
        self.dir = workdir
        self.ports = ports or {name: free_port() for name in
                               ("master", "replica", "sentinel1", "sentinel2", "sentinel3")}

    @property
    def url(self) -> str:
        nodes = ",".join(f"127.0.0.1:{self.ports[f'sentinel{n}']}" for n in (1, 2, 3))
        return f"redis+sentinel://{nodes}/{SERVICE}/0"

    def _start(self, name: str, *args: str) -> None:
        log = open(self.dir / f"redis-{name}.log", "a")
        try:
            proc = subprocess.Popen(["redis-server", *args], stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True)
        finally:
            log.close()
        (self.dir / f"redis-{name}.pid").write_text(str(proc.pid))

    def _server(self, name: str, *extra: str) -> None:
        self._start(name, "--port", str(self.ports[name]), "--bind", "127.0.0.1", "--save", "",
                    "--appendonly", "no", "--dir", str(self.dir), *extra)

    def start(self) -> "RedisSentinels":
        self.dir.mkdir(parents=True, exist_ok=True)
        self._server("master")
        _until(lambda: redis.Redis(port=self.ports["master"]).ping(), 10, "the Redis master")
        self._server("replica", "--replicaof", "127.0.0.1", str(self.ports["master"]))
        _until(lambda: redis.Redis(port=self.ports["replica"]).info("replication")
               .get("master_link_status") == "up", 20, "the Redis replica")
        for n in (1, 2, 3):
            conf = self.dir / f"sentinel{n}.conf"
            conf.write_text(f"port {self.ports[f'sentinel{n}']}\nbind 127.0.0.1\ndir {self.dir}\n"
                            f"sentinel monitor {SERVICE} 127.0.0.1 {self.ports['master']} 2\n"
                            f"sentinel down-after-milliseconds {SERVICE} 1000\n"
                            f"sentinel failover-timeout {SERVICE} 5000\n"
                            f"sentinel parallel-syncs {SERVICE} 1\n")
            self._start(f"sentinel{n}", str(conf), "--sentinel")
        def agreed():
            return self.master() == self.ports["master"] and all(
                int(redis.Redis(port=self.ports[f"sentinel{n}"]).sentinel_master(SERVICE)
                    ["num-other-sentinels"]) == 2 for n in (1, 2, 3))

        _until(agreed, 30, "three sentinels agreeing on the master")
        return self

    def master(self) -> int | None:
        found = redis.Redis(port=self.ports["sentinel1"]).execute_command(
            "SENTINEL", "get-master-addr-by-name", SERVICE)
        return int(found[1]) if found else None

    def _name_of(self, port: int) -> str:
        return next(name for name, p in self.ports.items() if p == port)

    def _pid(self, name: str) -> int | None:
        path = self.dir / f"redis-{name}.pid"
        return int(path.read_text()) if path.exists() else None

    def kill_master(self) -> int:
        """SIGKILL the current master; the sentinels promote the replica. Returns its port."""
        port = self.master()
        pid = self._pid(self._name_of(port))
        if pid is not None:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return port

    def rejoin(self, port: int, master: int) -> None:
        """The killed server comes back, as a replica of the new master (the sentinels would
        reconfigure it so anyway)."""
        self._server(self._name_of(port), "--replicaof", "127.0.0.1", str(master))
        _until(lambda: redis.Redis(port=port).info("replication").get("master_link_status") == "up",
               30, "the old Redis master to follow the new one")

    def stop(self) -> None:
        for name in self.ports:
            pid = self._pid(name)
            if pid is not None:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass


class Formation:
    """Both, in one work directory; ``state.json`` records the ports."""

    def __init__(self, workdir: Path):
        self.dir = Path(workdir)
        state = self.dir / "state.json"
        saved = json.loads(state.read_text()) if state.exists() else {}
        self.postgres = PostgresHA(self.dir / "postgres", saved.get("postgres"))
        self.redis = RedisSentinels(self.dir / "redis", saved.get("redis"))

    def up(self) -> "Formation":
        self.dir.mkdir(parents=True, exist_ok=True)
        (self.dir / "state.json").write_text(json.dumps(
            {"postgres": self.postgres.ports, "redis": self.redis.ports}))
        try:
            self.redis.start()
            self.postgres.start()
        except BaseException:
            self.down()
            raise
        return self

    def urls(self) -> dict[str, str]:
        return {"JOBFENCE_DATABASE_URL": self.postgres.url(), "JOBFENCE_REDIS_URL": self.redis.url}

    def status(self) -> dict:
        out: dict = {"urls": self.urls()}
        try:
            out["postgres"] = {n: {"reported": r, "assigned": g}
                               for n, (r, g) in sorted(self.postgres.states().items())}
            out["postgres_primary"] = self.postgres.primary()
        except (psycopg.Error, FormationError) as exc:
            out["postgres_error"] = str(exc).strip()
        try:
            out["redis_master_port"] = self.redis.master()
        except redis.RedisError as exc:
            out["redis_error"] = str(exc)
        return out

    def down(self, remove: bool = True) -> None:
        self.postgres.stop()
        self.redis.stop()
        if remove:
            shutil.rmtree(self.dir, ignore_errors=True)
