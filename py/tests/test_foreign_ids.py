"""Ids in a worker's ready lists that are not its queues' jobs (docs/security.md, "Redis"):
another queue's job pushed into the wrong list is a no-op claim, counted and warned about,
and stays queued for its own queue's workers; an id this database does not have (another
deployment on the same Redis database) is counted and warned about the same way."""

from __future__ import annotations

import redis as redis_lib

from jobfence.db import Database
from jobfence.transport import ready_key

from conftest import E2E_TYPE_OPTIONS, wait_until


def test_another_queues_job_pushed_into_a_workers_list_is_not_claimed(procs, client, redis_url):
    db = Database(procs.database_url, max_size=1)
    try:
        db.define_type("sleep", queue="billing", **E2E_TYPE_OPTIONS)
    finally:
        db.close()
    worker = procs.worker("w-default", "--no-declare", "--queue", "default")
    foreign = client.db.submit("sleep", {"seconds": 0}).id  # no signal: only the planted one
    r = redis_lib.Redis.from_url(redis_url)
    try:
        # What a Redis client with write access could do; then a real job of the queue.
        r.rpush(ready_key("default"), foreign, 10 ** 12)
    finally:
        r.close()
    sentinel = client.submit("noop", {})
    assert client.wait(sentinel, timeout=20).status == "done"

    warned = worker.wait_for("unclaimed_other_queue", timeout=10)[0]
    assert warned["count"] == 1 and warned["job_ids"] == [foreign], warned
    unknown = worker.wait_for("unclaimed_unknown", timeout=10)[0]
    assert unknown["job_ids"] == [10 ** 12] and "another deployment" in unknown["msg"], unknown
    job = client.get(foreign)
    assert (job.status, job.lease_version, job.retry_count) == ("queued", 0, 0), job
    assert not worker.find("claimed", job_id=foreign)

    # Its own queue's worker runs it.
    procs.worker("w-billing", "--no-declare", "--queue", "billing")
    r = redis_lib.Redis.from_url(redis_url)
    try:
        r.rpush(ready_key("billing"), foreign)
    finally:
        r.close()
    assert client.wait(foreign, timeout=20).status == "done"


def test_unclaimed_warnings_are_one_line_per_interval_with_a_count():
    from jobfence.worker.misses import MissReport
    import logging

    seen = []

    class Grab(logging.Handler):
        def emit(self, record):
            seen.append(record)

    handler = Grab()
    log = logging.getLogger("jobfence")
    log.addHandler(handler)
    old = log.level
    log.setLevel(logging.INFO)
    try:
        report = MissReport("w", every=3600)
        for _ in range(1000):
            report.record({"unknown": [1, 2], "not_claimable": [3]})
    finally:
        log.removeHandler(handler)
        log.setLevel(old)
    lines = [r for r in seen if getattr(r, "event", None) == "unclaimed_unknown"]
    assert len(lines) == 1, [r.getMessage() for r in seen][:5]
    assert not [r for r in seen if getattr(r, "event", None) == "unclaimed_not_claimable"]
