"""What a Redis URL names (py/jobfence/redis_urls.py): one server, a Sentinel service or a
cluster; a malformed URL is refused with a message that says what is wrong."""

from __future__ import annotations

import pytest

from jobfence.redis_urls import parse


def test_sentinel_and_cluster_urls():
    s = parse("redis+sentinel://:s3cret@h1:26379,h2:26380/orders/3")
    assert (s.kind, s.nodes, s.service, s.db, s.password) == (
        "sentinel", [("h1", 26379), ("h2", 26380)], "orders", 3, "s3cret")
    c = parse("redis+cluster://user:pw@a:7000,b:7001")
    assert (c.kind, c.nodes, c.username, c.password) == ("cluster", [("a", 7000), ("b", 7001)], "user", "pw")
    assert parse("redis://127.0.0.1:6379/0").kind == "plain"
    assert parse("unix:///run/redis.sock").kind == "plain"


@pytest.mark.parametrize("url, message", [
    ("redis+sentinel://h:26379", "needs the service name"),
    ("redis+sentinel://h:26379/svc/zero", "only a database number"),
    ("redis+cluster://h:7000/1", "one database"),
    ("redis+cluster://h:notaport", "is not host:port"),
    ("redis+cluster://h:70000", "is not host:port"),
    ("memcached://h:11211", "unknown scheme"),
])
def test_malformed_urls(url, message):
    with pytest.raises(ValueError, match=message):
        parse(url)
