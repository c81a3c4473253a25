"""End to end, with workers, reaper and relay as real subprocesses against real servers."""

from __future__ import annotations

import signal

import psycopg
import pytest
import redis as redis_lib

from jobfence.errors import JobNotFound
from jobfence.transport import ready_key

from conftest import wait_until


def _terminal(client, ids):
    return all(client.get(i).status in ("done", "failed") for i in ids)


def _reasons(client, job_id):
    return [e.reason for e in client.events(job_id)]


def test_submit_to_done_with_result(procs, client):
    w = procs.worker("w1")
    job_id = client.submit("noop", {"hello": "world"})
    job = client.wait(job_id, timeout=15)
    assert job.status == "done" and job.result == {"ok": True}
    assert _reasons(client, job_id) == ["submitted", "claimed", "completed"]
    line = w.wait_for("completed", job_id=job_id)[0]
    assert line["lease_version"] == 1 and line["worker"] == "w1"


def test_retries_with_backoff_then_failed(procs, client):
    procs.worker("w1")
    procs.reaper()
    job_id = client.submit("flaky", {"fail_times": 99})
    job = client.wait(job_id, timeout=20)
    assert job.status == "failed" and job.retry_count == 4
    assert "planned failure on attempt 4" in job.error
    events = client.events(job_id)
    assert [e.reason for e in events] == (["submitted"] + ["claimed", "retried"] * 3
                                          + ["claimed", "exhausted"])
    # Each retry waited for its backoff (base 0.2 s: at least base/2 between fail and claim).
    for failed, claimed in zip(events[2::2], events[3::2]):
        assert (claimed.at - failed.at).total_seconds() >= 0.09


def test_flaky_job_recovers_within_its_budget(procs, client):
    procs.worker("w1")
    job_id = client.submit("flaky", {"fail_times": 2})
    job = client.wait(job_id, timeout=20)
    assert job.status == "done" and job.result == {"attempt": 3}


def test_non_retryable_error_fails_at_once(procs, client):
    procs.worker("w1")
    job_id = client.submit("flaky", {"p": 1.0, "permanent": True})
    job = client.wait(job_id, timeout=15)
    assert job.status == "failed" and job.retry_count == 1
    assert _reasons(client, job_id)[-1] == "failed"


def test_duplicate_ids_pushed_ten_times_run_each_job_once(procs, client, redis_url, conn):
    ids = client.submit_many([{"kind": "transfer", "payload": {"amount": i}} for i in range(20)])
    r = redis_lib.Redis.from_url(redis_url)
    for _ in range(10):
        r.lpush(ready_key("default"), *[str(i) for i in ids])
    r.close()
    procs.worker("w1", "--concurrency", "4")
    procs.worker("w2", "--concurrency", "4")
    wait_until(lambda: _terminal(client, ids), 30, what="all transfer jobs terminal")
    assert {client.get(i).status for i in ids} == {"done"}
    for i in ids:
        assert _reasons(client, i).count("claimed") == 1
    effects = dict(conn.execute(
        "SELECT job_id, count(*) FROM public.jobfence_example_effect GROUP BY job_id").fetchall())
    assert effects == {i: 1 for i in ids}


def test_fan_in_coordinator_runs_after_every_child(procs, client):
    procs.worker("w1", "--concurrency", "4")
    coordinator = client.fan_out([("sleep", {"seconds": 0.2 * i}) for i in range(4)],
                                 ("noop", {"then": True}))
    job = client.wait(coordinator, timeout=20)
    assert job.status == "done"
    children = client.children(coordinator)
    assert len(children) == 4 and all(c.status == "done" for c in children)
    claimed_at = [e.at for e in client.events(coordinator) if e.reason == "claimed"][0]
    assert all(c.finished_at <= claimed_at for c in children)


def test_ordering_key_runs_jobs_one_after_another_in_id_order(procs, client):
    procs.worker("w1", "--concurrency", "4")
    procs.worker("w2", "--concurrency", "4")
    ids = [client.submit("sleep", {"seconds": 0.1}, ordering_key="account-7") for _ in range(5)]
    free = [client.submit("sleep", {"seconds": 0.1}) for _ in range(3)]
    wait_until(lambda: _terminal(client, ids + free), 30, what="ordered jobs terminal")
    jobs = [client.get(i) for i in ids]
    assert all(j.status == "done" for j in jobs)
    for before, after in zip(jobs, jobs[1:]):
        assert before.finished_at <= after.claimed_at


def test_relay_pushes_jobs_submitted_by_sql_producers(procs, declared, client):
    procs.worker("w1")
    relay = procs.start("relay", "relay", "--poll-interval", "0.5")
    relay.wait_for("relay_listening")
    with psycopg.connect(declared) as producer:  # one transaction: the outbox pattern
        single = producer.execute("SELECT id FROM jobs.submit('noop', '{}'::jsonb)").fetchone()[0]
        many = [r[0] for r in producer.execute(
            """SELECT id FROM jobs.submit_many('[{"kind":"noop"},{"kind":"noop"}]'::jsonb)""")]
        # Before the commit the job does not exist for anyone else, workers included.
        with pytest.raises(JobNotFound):
            client.get(single)
    wait_until(lambda: _terminal(client, [single] + many), 15, what="relayed jobs done")
    assert {client.get(i).status for i in [single] + many} == {"done"}


def test_cooperative_cancel_stops_a_running_job(procs, client):
    w = procs.worker("w1")
    job_id = client.submit("sleep", {"seconds": 30})
    wait_until(lambda: client.get(job_id).status == "processing", 10, what="job running")
    assert client.cancel(job_id).accepted
    job = client.wait(job_id, timeout=10)
    assert job.status == "failed"
    assert _reasons(client, job_id)[-2:] == ["cancel_requested", "cancelled"]
    w.wait_for("cancel_requested", job_id=job_id)


def test_per_kind_timeout_fails_the_attempt(procs, client):
    w = procs.worker("w1", env={"JOBFENCE_EXAMPLE_TIMEOUT": "1", "JOBFENCE_EXAMPLE_MAX_RETRIES": "0"})
    job_id = client.submit("sleep", {"seconds": 30})
    job = client.wait(job_id, timeout=15)
    assert job.status == "failed" and job.error == "timeout"
    w.wait_for("timeout", job_id=job_id)


def test_sigterm_drains_in_flight_jobs_and_exits_zero(procs, client):
    w = procs.worker("w1", "--concurrency", "3", "--grace", "20")
    # "steps" reports progress after its first step: proof that its handler started (a job
    # claimed but not yet started is handed back at shutdown, by design).
    ids = [client.submit("steps", {"steps": 3, "seconds": 0.5}) for _ in range(3)]
    wait_until(lambda: all(client.get(i).progress for i in ids), 10,
               what="three handlers running")
    w.signal(signal.SIGTERM)
    w.wait_for("stopping")
    late = client.submit("noop")
    assert w.wait(15) == 0
    assert [client.get(i).status for i in ids] == ["done"] * 3
    for i in ids:
        assert "reaped" not in _reasons(client, i)
    assert client.get(late).status == "queued", "a stopping worker must not take new work"
    assert w.find("worker_stopped")[0]["handed_back"] == 0


def test_grace_expiry_hands_jobs_back(procs, client):
    w = procs.worker("w1", "--grace", "0.5")
    job_id = client.submit("transfer", {"seconds": 30})
    wait_until(lambda: client.get(job_id).status == "processing", 10, what="job running")
    w.signal(signal.SIGTERM)
    assert w.wait(15) == 0
    job = client.get(job_id)
    assert job.status == "queued" and job.error == "worker shutdown"
    assert w.find("worker_stopped")[0]["handed_back"] == 1


def test_heartbeats_keep_a_job_longer_than_its_lease(procs, client):
    w = procs.worker("w1")
    procs.reaper()
    job_id = client.submit("sleep", {"seconds": 4})  # lease_timeout is 2 s in these tests
    job = client.wait(job_id, timeout=20)
    assert job.status == "done"
    assert _reasons(client, job_id) == ["submitted", "claimed", "completed"]
    assert not w.find("heartbeat_lost")


def test_replay_re_drives_a_failed_job(procs, client):
    job_id = client.submit("noop")
    assert client.cancel(job_id).status == "failed"
    procs.worker("w1")
    assert client.replay(job_id) is True
    job = client.wait(job_id, timeout=15)
    assert job.status == "done"
    assert _reasons(client, job_id)[-3:] == ["replayed", "claimed", "completed"]
    assert client.replay(job_id) is False  # replay of a done job is a no-op


def test_delayed_job_waits_for_its_run_after(procs, client):
    from datetime import datetime, timedelta, timezone

    procs.worker("w1")
    at = datetime.now(timezone.utc) + timedelta(seconds=1.5)
    job_id = client.submit("noop", run_after=at)
    job = client.wait(job_id, timeout=15)
    assert job.status == "done" and job.claimed_at >= at
