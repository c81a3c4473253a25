"""Private Redis topologies on loopback, started and stopped by the tests themselves: a
primary with a replica watched by a Sentinel, and a three-node Redis Cluster."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import redis

from conftest import _free_port


def _wait(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            found = predicate()
            if found:
                return found
        except redis.RedisError:
            pass
        time.sleep(0.05)
    raise TimeoutError(what)


def _server(port: int, workdir: Path, *extra: str) -> subprocess.Popen:
    return subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1",
                             "--save", "", "--appendonly", "no", "--dir", str(workdir), *extra],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


class SentinelSet:
    """A primary, one replica of it, and one Sentinel (quorum 1) that fails over quickly."""

    SERVICE = "jobfence"

    def __init__(self, workdir: Path):
        self.dir = workdir
        self.primary_port, self.replica_port, self.sentinel_port = (_free_port() for _ in range(3))
        self.procs: dict[str, subprocess.Popen] = {}

    @property
    def url(self) -> str:
        return f"redis+sentinel://127.0.0.1:{self.sentinel_port}/{self.SERVICE}/0"

    def start(self) -> "SentinelSet":
        self.dir.mkdir(parents=True, exist_ok=True)
        self.procs["primary"] = _server(self.primary_port, self.dir)
        _wait(lambda: redis.Redis(port=self.primary_port).ping(), 10, "primary")
        self.procs["replica"] = _server(self.replica_port, self.dir, "--replicaof", "127.0.0.1",
                                        str(self.primary_port))
        _wait(lambda: redis.Redis(port=self.replica_port).info("replication")
              .get("master_link_status") == "up", 20, "replica in sync")
        conf = self.dir / "sentinel.conf"
        conf.write_text(f"""port {self.sentinel_port}
bind 127.0.0.1
dir {self.dir}
sentinel monitor {self.SERVICE} 127.0.0.1 {self.primary_port} 1
sentinel down-after-milliseconds {self.SERVICE} 1000
sentinel failover-timeout {self.SERVICE} 5000
sentinel parallel-syncs {self.SERVICE} 1
""")
        self.procs["sentinel"] = subprocess.Popen(["redis-server", str(conf), "--sentinel"],
                                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _wait(lambda: self.primary() == self.primary_port, 20, "sentinel sees the primary")
        return self

    def primary(self) -> int | None:
        found = redis.Redis(port=self.sentinel_port).execute_command(
            "SENTINEL", "get-master-addr-by-name", self.SERVICE)
        return int(found[1]) if found else None

    def kill_primary(self) -> None:
        self.procs["primary"].kill()
        self.procs["primary"].wait(10)

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)


class Cluster:
    """Three primaries, no replicas: every hash slot served, queues spread over nodes."""

    def __init__(self, workdir: Path, nodes: int = 3):
        self.dir = workdir
        self.ports = [_free_port(pair_offset=10000) for _ in range(nodes)]
        self.procs: list[subprocess.Popen] = []

    @property
    def url(self) -> str:
        return "redis+cluster://" + ",".join(f"127.0.0.1:{p}" for p in self.ports)

    def start(self) -> "Cluster":
        for port in self.ports:
            node_dir = self.dir / str(port)
            node_dir.mkdir(parents=True, exist_ok=True)
            self.procs.append(_server(port, node_dir, "--cluster-enabled", "yes",
                                      "--cluster-config-file", str(node_dir / "nodes.conf"),
                                      "--cluster-node-timeout", "2000"))
        for port in self.ports:
            _wait(lambda: redis.Redis(port=port).ping(), 10, f"node {port}")
        created = subprocess.run(["redis-cli", "--cluster", "create",
                                  *(f"127.0.0.1:{p}" for p in self.ports), "--cluster-yes"],
                                 capture_output=True, text=True, timeout=60)
        if created.returncode != 0:
            raise RuntimeError(created.stdout + created.stderr)
        _wait(lambda: all(redis.Redis(port=p).cluster("info").get("cluster_state") == "ok"
                          for p in self.ports), 30, "cluster_state ok")
        return self

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
