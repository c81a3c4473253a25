"""Which Redis a URL names, and a client for it (docs/scaling.md, "Redis Sentinel and Redis
Cluster"):

- ``redis://``, ``rediss://``, ``unix://``: one server, as redis-py reads the URL;
- ``redis+sentinel://[[user]:password@]host:port[,host:port...]/service_name[/db]``: the
  primary that Sentinel names for ``service_name``, found again after a failover;
- ``redis+cluster://[[user]:password@]host:port[,host:port...]``: a Redis Cluster, through
  redis-py's ``RedisCluster`` (every multi-key command of jobfence stays in one queue's hash
  slot: see transport.py).

Redis only carries wake-up signals, so a failover that loses some costs latency: the reaper
re-pushes what PostgreSQL still holds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

import redis

SENTINEL = "redis+sentinel"
CLUSTER = "redis+cluster"
PLAIN = ("redis", "rediss", "unix")


@dataclass(frozen=True)
class Target:
    kind: str  # "plain", "sentinel" or "cluster"
    url: str
    nodes: list[tuple[str, int]] = field(default_factory=list)
    service: str | None = None
    db: int = 0
    username: str | None = None
    password: str | None = None


def _nodes(netloc: str) -> list[tuple[str, int]]:
    hosts = netloc.rsplit("@", 1)[-1]
    nodes = []
    for part in hosts.split(","):
        host, sep, port = part.strip().rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"{part.strip()!r} is not host:port")
        nodes.append((host.strip("[]"), int(port)))
    return nodes


def parse(url: str) -> Target:
    """The target of ``url``; ValueError (saying what is wrong) for a malformed one."""
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    if scheme in PLAIN:
        return Target("plain", url)
    if scheme not in (SENTINEL, CLUSTER):
        raise ValueError(f"unknown scheme {scheme or url!r}: use redis://, rediss://, unix://, "
                         f"{SENTINEL}:// or {CLUSTER}://")
    netloc = url.split("://", 1)[1].split("/", 1)[0]
    username = password = None
    if "@" in netloc:
        auth = netloc.rsplit("@", 1)[0]
        user, sep, secret = auth.partition(":")
        username, password = (unquote(user) or None), (unquote(secret) if sep else None)
    nodes = _nodes(netloc)
    path = [p for p in url.split("://", 1)[1].split("?", 1)[0].split("/")[1:] if p]
    if scheme == CLUSTER:
        if path:
            raise ValueError("a Redis Cluster has one database: no /path in a redis+cluster:// URL")
        return Target("cluster", url, nodes, username=username, password=password)
    if not path:
        raise ValueError("redis+sentinel:// needs the service name: redis+sentinel://host:port/mymaster")
    db = 0
    if len(path) > 2 or (len(path) == 2 and not path[1].isdigit()):
        raise ValueError(f"after the service name only a database number may follow, got {'/'.join(path[1:])!r}")
    if len(path) == 2:
        db = int(path[1])
    return Target("sentinel", url, nodes, service=unquote(path[0]), db=db,
                  username=username, password=password)


def connect(url: str, **options: Any):
    """A synchronous client; ``options`` (socket_timeout, ...) as for ``redis.Redis``."""
    from redis import cluster, sentinel

    return _client(url, options, redis.Redis, sentinel.Sentinel, cluster)


def connect_async(url: str, **options: Any):
    """An asyncio client, as ``connect``."""
    import redis.asyncio as aioredis
    from redis.asyncio import cluster, sentinel

    return _client(url, options, aioredis.Redis, sentinel.Sentinel, cluster)


def _client(url: str, options: dict, plain, sentinel_class, cluster_module):
    """The client of ``url`` from one flavour of redis-py (sync or asyncio)."""
    target = parse(url)
    if target.kind == "plain":
        return plain.from_url(url, **options)
    if target.kind == "sentinel":
        timeouts = {k: v for k, v in options.items() if k in ("socket_timeout", "socket_connect_timeout")}
        watchers = sentinel_class(target.nodes, sentinel_kwargs=dict(timeouts), **timeouts)
        return watchers.master_for(target.service, db=target.db, username=target.username,
                                   password=target.password, **options)
    options.pop("health_check_interval", None)
    return cluster_module.RedisCluster(
        startup_nodes=[cluster_module.ClusterNode(h, p) for h, p in target.nodes],
        username=target.username, password=target.password, **options)


def is_cluster(client) -> bool:
    from redis.cluster import RedisCluster

    return isinstance(client, RedisCluster)
