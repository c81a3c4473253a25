"""Issue 7: the queues the reaper and the relay sweep come from PostgreSQL, never from Redis.

Every job here is submitted with ``notify => false`` and never pushed: its signal is lost
before it was sent, so Redis holds no key for its queue and only PostgreSQL knows it exists.
"""

from __future__ import annotations

import psycopg
import redis as redis_lib

from jobfence.db import Database
from jobfence.reaper import Reaper
from jobfence.relay import Relay
from jobfence.transport import ready_key

from conftest import E2E_TYPE_OPTIONS, wait_until


def _ready_ids(redis_url: str, queue: str) -> list[int]:
    r = redis_lib.Redis.from_url(redis_url)
    try:
        return [int(x) for x in r.lrange(ready_key(queue), 0, -1)]
    finally:
        r.close()


def _no_keys(redis_url: str) -> list:
    r = redis_lib.Redis.from_url(redis_url)
    try:
        return r.keys("jobfence:*")
    finally:
        r.close()


def test_reaper_tick_repushes_a_lost_signal_of_a_queue_known_only_to_postgres(clean_db, redis_url):
    reaper = Reaper(clean_db, redis_url, stale_after=0.0)  # no --queue billing
    db = Database(clean_db, max_size=1, open_timeout=10)
    try:
        # The kind is declared after the reaper started: it must learn the queue at a tick,
        # not only at start-up.
        reaper.tick()
        db.define_type("invoice", queue="billing", **E2E_TYPE_OPTIONS)
        job = db.submit("invoice", {"n": 1}, notify=False)
        assert job.queue == "billing" and _no_keys(redis_url) == []

        def swept():
            reaper.tick()
            return job.id in _ready_ids(redis_url, "billing")

        wait_until(swept, 10, interval=0.1, what="the billing job re-pushed by the reaper")
    finally:
        db.close()
        reaper.db.close()
        reaper.transport.close()


def test_reaper_sweeps_a_queue_that_only_queued_jobs_name(clean_db, redis_url):
    """A kind moved to another queue leaves its older jobs in the old one: jobs.queues names
    that queue for as long as it holds queued jobs, though no kind is declared there."""
    reaper = Reaper(clean_db, redis_url, stale_after=0.0)
    db = Database(clean_db, max_size=1, open_timeout=10)
    try:
        db.define_type("invoice", queue="billing", **E2E_TYPE_OPTIONS)
        old = db.submit("invoice", {"n": 1}, notify=False)
        db.define_type("invoice", queue="billing-v2", **E2E_TYPE_OPTIONS)
        new = db.submit("invoice", {"n": 2}, notify=False)
        assert (old.queue, new.queue) == ("billing", "billing-v2")

        def swept():
            reaper.tick()
            return (old.id in _ready_ids(redis_url, "billing")
                    and new.id in _ready_ids(redis_url, "billing-v2"))

        wait_until(swept, 10, interval=0.1, what="both queues swept")
    finally:
        db.close()
        reaper.db.close()
        reaper.transport.close()


def test_relay_catch_up_finds_a_queue_known_only_to_postgres(clean_db, redis_url):
    relay = Relay(clean_db, redis_url, stale_after=0.0)  # no --queue billing
    db = Database(clean_db, max_size=1, open_timeout=10)
    try:
        db.define_type("invoice", queue="billing", **E2E_TYPE_OPTIONS)
        # notify => false stands for a notification sent while no relay listened.
        job = db.submit("invoice", {"n": 1}, notify=False)
        assert _no_keys(redis_url) == []

        def caught_up():
            relay.catch_up()
            return job.id in _ready_ids(redis_url, "billing")

        wait_until(caught_up, 10, interval=0.1, what="the billing job pushed by catch_up")
    finally:
        db.close()
        relay.db.close()
        relay.transport.close()


def test_billing_job_whose_signal_was_lost_is_done_by_a_billing_worker(procs):
    """The issue's reproduction, end to end: a reaper process started without --queue
    billing, a worker serving only billing, a job whose signal never reached Redis."""
    billing = {"JOBFENCE_EXAMPLE_QUEUE": "billing"}
    procs.worker("billing-worker", env=billing)  # declares the example kinds in billing
    db = Database(procs.database_url, max_size=1, open_timeout=10)
    try:
        job = db.submit("noop", {"lost": True}, notify=False)
        assert job.queue == "billing"
        reaper = procs.reaper()
        assert "billing" not in reaper.find("reaper_ready")[0]["queues"]

        wait_until(lambda: db.get(job.id).status == "done", 30, what="the billing job done")
        assert [e.worker for e in db.events(job.id) if e.reason == "claimed"] == ["billing-worker"]
        reaper.wait_for("reaper_tick", stale_repushed=1)
        assert "billing" in reaper.find("reaper_queues")[-1]["queues"]
    finally:
        db.close()


def test_relay_pushes_at_connect_what_was_committed_just_before_it_listened(procs, declared, redis_url):
    """A notification sent before the relay's LISTEN reaches no one. The relay's catch-up at
    connect must push such a job however recent it is; with only the stale sweep
    (--stale-after, here an hour) it would wait for a reaper, and there is none here."""
    with psycopg.connect(declared, autocommit=True) as c:
        job_id = c.execute("SELECT id FROM jobs.submit('noop', '{}', notify => true)").fetchone()[0]
    relay = procs.start("relay", "relay", "--stale-after", "3600")
    relay.wait_for("relay_listening")
    r = redis_lib.Redis.from_url(redis_url)
    try:
        wait_until(lambda: str(job_id).encode() in r.lrange(ready_key("default"), 0, -1),
                   timeout=30, what="the job's id pushed by the relay's catch-up")
    finally:
        r.close()
