"""Failures end to end: killed and paused workers, Redis flushed, stopped and restarted,
PostgreSQL connections dropped. Invariant: every job still reaches a terminal state, and a
stale lease never writes."""

from __future__ import annotations

import signal


from jobfence import Client

from conftest import wait_until


def _statuses(client, ids):
    return client.status_counts(ids)


def _all_done(client, ids):
    return _statuses(client, ids).get("done", 0) == len(ids)


def test_kill_9_mid_job_reaper_requeues_and_another_worker_finishes(procs, client):
    a = procs.worker("a")
    job_id = client.submit("sleep", {"seconds": 1.0})
    wait_until(lambda: client.get(job_id).owned_by == "a", 10, what="job claimed by a")
    a.signal(signal.SIGKILL)
    a.wait(5)
    procs.worker("b")
    procs.reaper()
    job = client.wait(job_id, timeout=20)
    assert job.status == "done"
    events = client.events(job_id)
    assert [e.reason for e in events] == ["submitted", "claimed", "reaped", "claimed", "completed"]
    assert [e.worker for e in events if e.reason == "claimed"] == ["a", "b"]


def test_crash_kind_kills_its_worker_and_the_job_is_retried(procs, client):
    a = procs.worker("a")
    job_id = client.submit("crash", {"attempts": 1})
    assert a.wait(10) == -signal.SIGKILL
    procs.worker("b")
    procs.reaper()
    job = client.wait(job_id, timeout=20)
    assert job.status == "done" and job.result == {"survived": True}


def test_paused_worker_past_its_lease_is_rejected_and_writes_nothing(procs, client, conn):
    a = procs.worker("a")
    job_id = client.submit("transfer", {"seconds": 1.5, "amount": 10})
    wait_until(lambda: client.get(job_id).owned_by == "a", 10, what="job claimed by a")
    a.signal(signal.SIGSTOP)
    try:
        procs.reaper()
        b = procs.worker("b")
        wait_until(lambda: client.get(job_id).status == "done", 20, what="b finishes the job")
        b.wait_for("completed", job_id=job_id)
    finally:
        a.signal(signal.SIGCONT)
    # a wakes up, finishes its handler, writes its row and loses at jobs.complete.
    lost = a.wait_for("lease_lost", timeout=15, job_id=job_id)[0]
    assert lost["sqlstate"] == "JB001" and lost["worker"] == "a" and lost["lease_version"] == 1
    rows = conn.execute("SELECT worker, lease_version FROM public.jobfence_example_effect "
                        "WHERE job_id = %s", (job_id,)).fetchall()
    assert rows == [("b", 3)], "the stale worker's effect must roll back with its completion"
    job = client.get(job_id)
    assert job.status == "done" and job.result["lease_version"] == 3
    assert [e.reason for e in client.events(job_id)].count("completed") == 1


def test_redis_flushall_mid_run_every_job_still_completes(procs, declared, redis_server):
    procs.use_redis(redis_server.url)
    procs.worker("w1", "--concurrency", "4")
    procs.reaper()
    with Client(declared, redis_server.url) as client:
        ids = client.submit_many([{"kind": "sleep", "payload": {"seconds": 0.02}}] * 300)
        wait_until(lambda: _statuses(client, ids).get("done", 0) >= 20, 20, what="some done")
        redis_server.client().flushall()
        wait_until(lambda: _all_done(client, ids), 60,
                   what=f"all done after FLUSHALL: {_statuses(client, ids)}")


def test_redis_down_at_submit_then_recovered_when_it_returns(procs, declared, redis_server):
    procs.use_redis(redis_server.url)
    redis_server.stop()
    with Client(declared, redis_server.url) as client:
        ids = [client.submit("noop", {"n": i}) for i in range(5)]
        assert {client.get(i).status for i in ids} == {"enqueue_failed"}
        reaper = procs.reaper()
        procs.worker("w1", ready=False)
        redis_server.start()
        wait_until(lambda: _all_done(client, ids), 30, what="recovered jobs done")
        assert all("recovered" in [e.reason for e in client.events(i)] for i in ids)
        assert reaper.find("reaper_tick")


def test_redis_restart_mid_run_workers_reconnect(procs, declared, redis_server):
    procs.use_redis(redis_server.url)
    w = procs.worker("w1", "--concurrency", "4")
    procs.reaper()
    with Client(declared, redis_server.url) as client:
        first = client.submit_many([{"kind": "noop"}] * 50)
        wait_until(lambda: _all_done(client, first), 20, what="first batch done")
        redis_server.stop()
        w.wait_for("redis_unavailable")
        offline = [client.submit("noop") for _ in range(5)]  # parked as enqueue_failed
        redis_server.start()
        later = client.submit_many([{"kind": "noop"}] * 50)
        wait_until(lambda: _all_done(client, offline + later), 30,
                   what=f"jobs after restart: {_statuses(client, offline + later)}")
        assert w.alive(), "the worker must survive a Redis restart"


def test_postgres_connections_dropped_mid_run_no_job_lost(procs, declared, client, conn):
    w = procs.worker("w1", "--concurrency", "4")
    procs.reaper()
    ids = client.submit_many([{"kind": "sleep", "payload": {"seconds": 0.05}}] * 200)
    wait_until(lambda: _statuses(client, ids).get("done", 0) >= 20, 20, what="some done")
    dbname = conn.info.dbname
    for _ in range(3):
        conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                     "WHERE datname = %s AND application_name LIKE 'jobfence-worker%%' "
                     "AND pid <> pg_backend_pid()", (dbname,))
    wait_until(lambda: _all_done(client, ids), 60,
               what=f"all done after dropped connections: {_statuses(client, ids)}")
    assert w.alive()


def test_two_reapers_requeue_each_crashed_job_once(procs, client):
    a = procs.worker("a", "--concurrency", "8")
    ids = client.submit_many([{"kind": "sleep", "payload": {"seconds": 1.0}}] * 8)
    wait_until(lambda: _statuses(client, ids).get("processing", 0) == 8, 10, what="8 running")
    a.signal(signal.SIGKILL)
    a.wait(5)
    procs.start("reaper-1", "reaper", "--interval", "0.2", "--stale-after", "0.5")
    procs.start("reaper-2", "reaper", "--interval", "0.2", "--stale-after", "0.5")
    procs.worker("b", "--concurrency", "8")
    wait_until(lambda: _all_done(client, ids), 30, what="all done after the crash")
    for i in ids:
        reasons = [e.reason for e in client.events(i)]
        assert reasons.count("reaped") == 1 and reasons.count("completed") == 1
