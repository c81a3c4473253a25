"""The HTTP API (`jobfence api`, docs/http.md) as a real subprocess on real PostgreSQL and
Redis: every route, every error, 202 semantics with Redis down, long polls, auth, the body
cap, and the committed OpenAPI document."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time

import psycopg
import pytest
from prometheus_client.parser import text_string_to_metric_families

from api_helpers import (ADMIN_TOKEN, PRODUCER_TOKEN, TOKENS, closed_port, job_rows, start_api,
                         status_of)
from conftest import REPO, _free_port, wait_until

OPENAPI = REPO / "docs" / "openapi.json"
PROBLEM = "application/problem+json"


@pytest.fixture
def api(procs, declared):
    return start_api(procs)


def admin(api):
    api.token = ADMIN_TOKEN
    return api


def assert_problem(answer, status, name, sqlstate=None):
    assert answer.status == status, (answer.status, answer.raw[:500])
    assert answer.media_type == PROBLEM, answer.headers
    body = answer.data
    for key in ("type", "title", "status", "detail", "name", "sqlstate"):
        assert key in body, (key, body)
    assert body["status"] == status and body["name"] == name, body
    assert body["sqlstate"] == sqlstate, body
    return body


def pushed_ids(redis_url, queue="default"):
    import redis as redis_lib

    from jobfence.transport import ready_key

    r = redis_lib.Redis.from_url(redis_url)
    try:
        return [int(x) for x in r.lrange(ready_key(queue), 0, -1)]
    finally:
        r.close()


# -- submitting -------------------------------------------------------------------------------
def test_submit_answers_202_with_location_links_and_pushes_after_commit(api, declared, redis_url):
    answer = api.post("/jobs", {"kind": "noop", "payload": {"n": 1}})
    assert answer.status == 202, answer.raw
    body = answer.data
    job_id = body["id"]
    assert answer.headers["location"] == f"/jobs/{job_id}"
    assert body["kind"] == "noop" and body["status"] == "queued"
    assert body["enqueued"] is True and body["created"] is True and "detail" not in body
    assert body["links"] == {"self": f"/jobs/{job_id}", "events": f"/jobs/{job_id}/events"}
    assert status_of(declared, job_id) == "queued"
    assert pushed_ids(redis_url) == [job_id]

    later = api.post("/jobs", {"kind": "noop", "run_after": 3600, "ordering_key": "acct:1"})
    assert later.status == 202
    job = api.get(f"/jobs/{later.data['id']}").data
    assert job["ordering_key"] == "acct:1"
    assert 3500 < _epoch(job["run_after"]) - time.time() < 3700
    at = api.post("/jobs", {"kind": "noop", "run_after": "2031-01-02T03:04:05Z"}).data
    assert api.get(f"/jobs/{at['id']}").data["run_after"].startswith("2031-01-02T03:04:05")


def _epoch(iso: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(iso).timestamp()


def test_a_repeated_idempotency_key_returns_the_existing_job_with_200(api, declared):
    first = api.post("/jobs", {"kind": "noop", "payload": {"invoice": 42, "lines": [1, 2]},
                               "run_after": 30, "ordering_key": "acct:1"},
                     headers={"Idempotency-Key": "invoice:42"})
    # The same request again (a relative run_after is another instant: not compared; key
    # order in the payload does not matter).
    again = api.post("/jobs", {"kind": "noop", "payload": {"lines": [1, 2], "invoice": 42},
                               "run_after": 31, "ordering_key": "acct:1"},
                     headers={"Idempotency-Key": "invoice:42"})
    assert first.status == 202 and again.status == 200, (first.raw, again.raw)
    assert first.data["created"] is True and again.data["created"] is False
    assert again.headers["location"] == first.headers["location"]
    same = {k: v for k, v in first.data.items() if k != "created"}
    assert {k: v for k, v in again.data.items() if k != "created"} == same
    assert job_rows(declared) == 1


def test_a_repeated_idempotency_key_with_another_request_is_a_422_and_changes_nothing(api, declared):
    """The IETF Idempotency-Key draft: a key reused with a different request is a 422 naming
    the key; the stored job is untouched, and in a batch nothing of the batch is written."""
    first = api.post("/jobs", {"kind": "noop", "payload": {"invoice": 42},
                               "run_after": "2031-01-02T03:04:05Z"},
                     headers={"Idempotency-Key": "invoice:42"})
    assert first.status == 202, first.raw
    for body, differs in (({"kind": "noop", "payload": {"invoice": 43}, "run_after": "2031-01-02T03:04:05Z"}, ["payload"]),
                          ({"kind": "noop", "payload": {"invoice": 42}, "run_after": "2032-01-02T03:04:05Z"}, ["run_after"]),
                          ({"kind": "noop", "payload": {"invoice": 42}, "run_after": "2031-01-02T03:04:05Z",
                            "ordering_key": "acct:9", "priority": 7}, ["ordering_key", "priority"])):
        problem = assert_problem(api.post("/jobs", body, headers={"Idempotency-Key": "invoice:42"}),
                                 422, "idempotency_key_reused")
        assert "'invoice:42'" in problem["detail"] and str(first.data["id"]) in problem["detail"]
        assert problem["differences"] == [{"index": 0, "idempotency_key": "invoice:42",
                                           "job_id": first.data["id"], "differs": differs}]
    stored = api.get(f"/jobs/{first.data['id']}").data
    assert stored["payload"] == {"invoice": 42} and stored["ordering_key"] is None
    # A batch: the new spec beside the mismatched repeat is not written either.
    batch = api.post("/jobs/batch", {"jobs": [
        {"kind": "noop", "idempotency_key": "fresh:1"},
        {"kind": "noop", "idempotency_key": "invoice:42", "payload": {"invoice": 44}}]})
    problem = assert_problem(batch, 422, "idempotency_key_reused")
    assert problem["differences"][0]["index"] == 1
    assert job_rows(declared) == 1
    # An identical repeat in a batch still answers the original job.
    ok = api.post("/jobs/batch", {"jobs": [{"kind": "noop", "idempotency_key": "invoice:42",
                                            "payload": {"invoice": 42},
                                            "run_after": "2031-01-02T03:04:05Z"}]})
    assert ok.status == 202 and ok.data["jobs"][0]["id"] == first.data["id"], ok.raw
    # A fan-out whose coordinator key is reused with another payload.
    family = {"children": [{"kind": "noop"}], "then": {"kind": "noop", "payload": {"album": 7},
                                                       "idempotency_key": "album:7"}}
    assert api.post("/jobs/fan-out", family).status == 202
    family["then"]["payload"] = {"album": 8}
    assert_problem(api.post("/jobs/fan-out", family), 422, "idempotency_key_reused")
    assert job_rows(declared) == 3


def test_redis_down_still_answers_202_then_the_reaper_signals_and_a_worker_finishes(procs, declared):
    offline = start_api(procs, name="api-offline", redis_url=f"redis://127.0.0.1:{closed_port()}/0")
    answer = offline.post("/jobs", {"kind": "noop", "payload": {"n": 7}})
    assert answer.status == 202, answer.raw
    body = answer.data
    assert body["enqueued"] is False and body["status"] == "enqueue_failed"
    assert "reaper" in body["detail"]
    assert answer.headers["location"] == f"/jobs/{body['id']}"
    assert status_of(declared, body["id"]) == "enqueue_failed"
    batch = offline.post("/jobs/batch", {"jobs": [{"kind": "noop"}, {"kind": "noop"}]})
    assert batch.status == 202 and batch.data["enqueued"] is False
    assert {j["status"] for j in batch.data["jobs"]} == {"enqueue_failed"}
    assert offline.proc.find("enqueue_failed")

    # Jobs are still accepted, so the instance stays in rotation: 200, degraded.
    health = offline.get("/healthz", token=None)
    assert health.status == 200, health.raw
    assert health.data["degraded"] is True and health.data["status"] == "degraded"
    assert health.data["postgresql"] == "ok" and health.data["redis"] != "ok"

    # The API itself reads PostgreSQL only, so it can follow the job the others repair.
    procs.reaper()
    procs.worker("w1")
    done = offline.get(f"/jobs/{body['id']}?wait=30").data
    assert done["status"] == "done" and done["result"] == {"ok": True}
    for item in batch.data["jobs"]:
        assert offline.get(f"/jobs/{item['id']}?wait=30").data["status"] == "done"
    reasons = [e["reason"] for e in offline.get(f"/jobs/{body['id']}/events").data["events"]]
    assert reasons[:3] == ["submitted", "enqueue_failed", "recovered"], reasons


def test_batch_is_all_or_nothing_and_bounded(api, declared):
    answer = api.post("/jobs/batch", {"jobs": [
        {"kind": "noop", "payload": {"n": 1}},
        {"kind": "noop", "idempotency_key": "b-1"},
        {"kind": "noop", "run_after": 60}]})
    assert answer.status == 202, answer.raw
    jobs = answer.data["jobs"]
    assert answer.data["enqueued"] is True and len(jobs) == 3
    assert [j["created"] for j in jobs] == [True, True, True]
    assert all(j["links"]["self"] == f"/jobs/{j['id']}" for j in jobs)
    repeat = api.post("/jobs/batch", {"jobs": [{"kind": "noop", "idempotency_key": "b-1"}]})
    assert repeat.data["jobs"][0]["id"] == jobs[1]["id"]
    assert repeat.data["jobs"][0]["created"] is False
    before = job_rows(declared)
    bad = api.post("/jobs/batch", {"jobs": [{"kind": "noop"}, {"kind": "nosuchkind"}]})
    assert "specs[1]" in assert_problem(bad, 422, "unknown_kind", "JB005")["detail"]
    too_many = api.post("/jobs/batch", {"jobs": [{"kind": "noop"}] * 1001})
    assert_problem(too_many, 400, "bad_request")
    assert_problem(api.post("/jobs/batch", {"jobs": []}), 400, "bad_request")
    assert job_rows(declared) == before


def test_a_run_after_postgresql_cannot_read_gets_one_answer_on_every_route(api, declared):
    before = job_rows(declared)
    for when in ("2030-01-01T00:00:00+16:00", "2030-01-01T00:00:00-16:00",
                 "2030-01-01T00:00:00+05:30:30.5"):
        spec = {"kind": "noop", "run_after": when}
        for path, body in (("/jobs", spec), ("/jobs/batch", {"jobs": [spec]}),
                           ("/jobs/fan-out", {"children": [spec], "then": {"kind": "noop"}})):
            refused = assert_problem(api.post(path, body), 400, "invalid_parameter_value", "22023")
            assert "run_after" in refused["detail"] and "+-15:59" in refused["hint"], refused
    assert job_rows(declared) == before
    edge = api.post("/jobs", {"kind": "noop", "run_after": "2030-01-01T00:00:00+15:59:59"})
    assert edge.status == 202, edge.raw


def test_a_key_repeated_inside_a_batch_is_created_only_by_its_first_item(api, declared):
    key = {"kind": "noop", "idempotency_key": "in-batch"}
    answer = api.post("/jobs/batch", {"jobs": [key, {"kind": "noop"}, key, key]})
    assert answer.status == 202, answer.raw
    jobs = answer.data["jobs"]
    assert [j["created"] for j in jobs] == [True, True, False, False]
    assert jobs[0]["id"] == jobs[2]["id"] == jobs[3]["id"] != jobs[1]["id"]
    assert job_rows(declared) == 2
    # A copy that differs from the first is a repeat like any other: 422, nothing written.
    differing = api.post("/jobs/batch", {"jobs": [
        {"kind": "noop", "idempotency_key": "in-batch:2", "payload": {"n": 1}},
        {"kind": "noop", "idempotency_key": "in-batch:2", "payload": {"n": 2}}]})
    assert assert_problem(differing, 422, "idempotency_key_reused")["differences"][0]["index"] == 1
    assert job_rows(declared) == 2


def test_fan_out_answers_the_coordinator_and_its_children(api, procs, declared):
    answer = api.post("/jobs/fan-out", {
        "children": [{"kind": "noop", "payload": {"i": i}} for i in range(3)],
        "then": {"kind": "noop", "payload": {"album": 7}, "idempotency_key": "album:7"}})
    assert answer.status == 202, answer.raw
    body = answer.data
    coordinator = body["id"]
    assert answer.headers["location"] == f"/jobs/{coordinator}"
    assert body["created"] is True and body["enqueued"] is True
    assert len(body["children"]) == 3
    assert all(c["id"] > coordinator for c in body["children"])
    # The coordinator's spec decides a repeat (its children are the stored job's).
    again = api.post("/jobs/fan-out", {"children": [{"kind": "noop"}],
                                       "then": {"kind": "noop", "payload": {"album": 7},
                                                "idempotency_key": "album:7"}})
    assert again.status == 200 and again.data["id"] == coordinator
    assert again.data["created"] is False
    children = api.get(f"/jobs/{coordinator}/children").data["children"]
    assert [c["id"] for c in children] == [c["id"] for c in body["children"]]
    assert api.get(f"/jobs/{children[0]['id']}/children").data == {"children": []}
    procs.worker("w1")
    done = api.get(f"/jobs/{coordinator}?wait=30").data
    assert done["status"] == "done"
    assert {c["status"] for c in api.get(f"/jobs/{coordinator}/children").data["children"]} == {"done"}


# -- reading ----------------------------------------------------------------------------------
def test_get_events_and_list_pages(api, declared):
    ids = [api.post("/jobs", {"kind": "noop", "payload": {"n": i}}).data["id"] for i in range(5)]
    other = api.post("/jobs", {"kind": "sleep", "payload": {"seconds": 0}}).data["id"]
    job = api.get(f"/jobs/{ids[0]}").data
    for key in ("id", "kind", "queue", "status", "payload", "result", "error", "attempt",
                "retry_count", "lease_version", "created_at", "updated_at", "claimed_at",
                "finished_at", "run_after", "links"):
        assert key in job, key
    assert job["payload"] == {"n": 0} and job["attempt"] == 1 and job["lease_version"] == 0
    events = api.get(f"/jobs/{ids[0]}/events").data["events"]
    assert [(e["to_status"], e["reason"]) for e in events] == [("queued", "submitted")]

    seen, path = [], "/jobs?kind=noop&limit=2"
    while path:
        page = api.get(path)
        assert page.status == 200, page.raw
        seen += [j["id"] for j in page.data["jobs"]]
        path = page.data["next"]
    assert seen == sorted(ids, reverse=True)
    assert [j["id"] for j in api.get("/jobs").data["jobs"]] == [other] + sorted(ids, reverse=True)
    assert api.get("/jobs?status=done").data == {"jobs": [], "next": None}
    assert_problem(api.get("/jobs?limit=0"), 400, "bad_request")
    assert_problem(api.get("/jobs?limit=1001"), 400, "bad_request")
    assert_problem(api.get("/jobs?status=lost"), 400, "bad_request")

    queues = api.get("/queues").data["queues"]
    noop = next(r for r in queues if r["kind"] == "noop")
    assert noop["queue"] == "default" and noop["queued_ready"] == 5
    assert api.get("/healthz", token=None).data == {"status": "ok", "degraded": False,
                                                    "postgresql": "ok", "redis": "ok"}


def test_long_poll_returns_when_a_worker_completes_the_job(procs, declared):
    # Two connections for twenty waiters: a waiter holding a connection would starve the
    # others into 503s; the hub polls for all of them in one statement instead.
    api = start_api(procs, "--pool-size", "2")
    ids = [api.post("/jobs", {"kind": "noop", "payload": {"n": i}}).data["id"] for i in range(4)]
    answers, errors = {}, []

    def wait_for(n, job_id):
        try:
            answers[n] = api.get(f"/jobs/{job_id}?wait=45", timeout=60)
        except Exception as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=wait_for, args=(n, ids[n % 4])) for n in range(20)]
    for t in threads:
        t.start()
    admin(api)
    wait_until(lambda: _gauge(api, "jobfence_api_long_polls") == 20, 20,
               what="20 requests waiting")
    started = time.monotonic()
    procs.worker("w1")
    for t in threads:
        t.join(60)
    assert not errors, errors
    assert len(answers) == 20
    assert all(a.status == 200 and a.data["status"] == "done" for a in answers.values()), \
        [a.raw[:200] for a in answers.values()]
    assert time.monotonic() - started < 30

    # A wait that ends first answers 200 with the job as it is.
    api.token = PRODUCER_TOKEN
    idle = api.post("/jobs", {"kind": "noop", "run_after": 3600}).data["id"]
    t0 = time.monotonic()
    waited = api.get(f"/jobs/{idle}?wait=0.5")
    assert waited.status == 200 and waited.data["status"] == "queued"
    assert 0.45 <= time.monotonic() - t0 < 10
    assert_problem(api.get(f"/jobs/{idle}?wait=61"), 400, "bad_request")
    assert_problem(api.get(f"/jobs/{idle}?wait=-1"), 400, "bad_request")
    assert_problem(api.get("/jobs/999999?wait=1"), 404, "job_not_found", "JB002")


def _gauge(api, name):
    answer = api.get("/metrics")
    assert answer.status == 200, answer.raw
    for family in text_string_to_metric_families(answer.raw.decode()):
        for sample in family.samples:
            if sample.name == name:
                return sample.value
    return None


# -- cancel and replay ------------------------------------------------------------------------
def test_cancel_and_replay(api, procs, declared, redis_url):
    queued = api.post("/jobs", {"kind": "noop", "run_after": 3600}).data["id"]
    cancelled = api.post(f"/jobs/{queued}/cancel", {"reason": "customer withdrew"})
    assert cancelled.status == 200, cancelled.raw
    assert cancelled.data["accepted"] is True and cancelled.data["status"] == "failed"
    assert api.get(f"/jobs/{queued}").data["error"] == "customer withdrew"
    again = api.post(f"/jobs/{queued}/cancel")
    assert assert_problem(again, 409, "already_finished")["job_status"] == "failed"

    assert_problem(api.post(f"/jobs/{queued}/replay"), 403, "forbidden")
    replayed = admin(api).post(f"/jobs/{queued}/replay")
    assert replayed.status == 202, replayed.raw
    assert replayed.data["replayed"] is True and replayed.data["status"] == "queued"
    assert queued in pushed_ids(redis_url)
    assert_problem(api.post(f"/jobs/{queued}/replay"), 409, "illegal_transition", "JB003")

    procs.worker("w1")
    running = api.post("/jobs", {"kind": "sleep", "payload": {"seconds": 30}}).data["id"]
    wait_until(lambda: status_of(declared, running) == "processing", 20, what="sleep claimed")
    flagged = api.post(f"/jobs/{running}/cancel")
    assert flagged.status == 202 and flagged.data["status"] == "processing", flagged.raw
    ended = api.get(f"/jobs/{running}?wait=30").data
    assert ended["status"] == "failed" and ended["cancel_requested_at"]
    assert api.get(f"/jobs/{queued}?wait=30").data["status"] == "done"
    assert_problem(api.post(f"/jobs/{queued}/replay"), 409, "already_done")


def test_replay_many_over_http(api, declared, redis_url):
    ids = [api.post("/jobs", {"kind": "noop", "run_after": 3600}).data["id"] for _ in range(3)]
    for job_id in ids:
        api.post(f"/jobs/{job_id}/cancel", {"reason": "bank timeout"})
    body = {"kind": "noop", "error_like": "%timeout%", "max_jobs": 2}
    assert_problem(api.post("/dead-letters/replay", body), 403, "forbidden")
    assert [status_of(declared, i) for i in ids] == ["failed"] * 3
    first = admin(api).post("/dead-letters/replay", body)
    assert first.status == 200, first.raw
    assert first.data == {"replayed": 2, "ids": ids[:2], "enqueued": True}
    assert set(ids[:2]) <= set(pushed_ids(redis_url))
    rest = api.post("/dead-letters/replay", {"kind": "noop"})
    assert rest.data["ids"] == ids[2:]
    assert api.post("/dead-letters/replay", {"kind": "noop"}).data == {
        "replayed": 0, "ids": [], "enqueued": True}
    assert_problem(api.post("/dead-letters/replay", {"max_jobs": 0}), 400, "bad_request")
    assert_problem(api.post("/dead-letters/replay", {"kind": "noop", "extra": 1}), 400,
                   "bad_request")
    # Every field is optional, so is the body: none means {} (every kind, up to 1000).
    late = api.post("/jobs", {"kind": "noop", "run_after": 3600}).data["id"]
    api.post(f"/jobs/{late}/cancel")
    bare = api.post("/dead-letters/replay")
    assert bare.status == 200, bare.raw
    assert bare.data == {"replayed": 1, "ids": [late], "enqueued": True}
    empty = api.post("/dead-letters/replay", raw=b"")
    assert empty.status == 200 and empty.data["replayed"] == 0, empty.raw


def test_replay_many_filters_get_one_answer_whether_or_not_a_job_matches(api, declared):
    # LIKE refuses a pattern ending in its escape character only once it meets a row, and no
    # job has a malformed kind: both are refused before the statement, as GET /jobs?kind=.
    admin(api)
    for existing in (False, True):
        if existing:
            failed = api.post("/jobs", {"kind": "noop", "run_after": 3600}).data["id"]
            api.post(f"/jobs/{failed}/cancel", {"reason": "disk 100% full"})
        for body, location in (({"error_like": "\\"}, "body.error_like"),
                               ({"kind": "noop", "error_like": "%\\\\\\"}, "body.error_like"),
                               ({"kind": "Bad Kind"}, "body.kind")):
            refused = assert_problem(api.post("/dead-letters/replay", body), 400,
                                     "invalid_parameter_value", "22023")
            assert refused["errors"][0]["location"] == location and refused["hint"], refused
    assert status_of(declared, failed) == "failed"
    found = api.post("/dead-letters/replay", {"error_like": "%100\\%%"})
    assert found.status == 200 and found.data["ids"] == [failed], found.raw


# -- errors -----------------------------------------------------------------------------------
def test_every_error_is_a_problem_document_and_changes_nothing(api, declared):
    from jobfence.db import Database

    db = Database(declared, max_size=1, open_timeout=10)
    try:
        db.define_type("tiny", max_payload_bytes=64)
    finally:
        db.close()
    existing = api.post("/jobs", {"kind": "noop"}).data["id"]
    before = job_rows(declared)

    assert_problem(api.post("/jobs", {"kind": "nosuchkind"}), 422, "unknown_kind", "JB005")
    large = assert_problem(api.post("/jobs", {"kind": "tiny", "payload": {"blob": "x" * 100}}),
                           413, "payload_too_large", "JB004")
    assert "reference" in large["detail"]
    assert_problem(api.post("/jobs", raw=b'{"kind": "noop",', headers={
        "Content-Type": "application/json"}), 400, "bad_request")
    assert_problem(api.post("/jobs", raw=b"kind=noop", headers={
        "Content-Type": "application/x-www-form-urlencoded"}), 415, "unsupported_media_type")
    for bad in ({"payload": {}}, {"kind": 5}, {"kind": "noop", "payload": [1]},
                {"kind": "noop", "payload": None}, {"kind": "noop", "extra": 1},
                {"kind": "noop", "idempotency_key": "in-the-header-please"},
                {"kind": "noop", "run_after": "tomorrow"}, {"kind": "noop", "run_after": 1e300},
                {"kind": "noop", "run_after": True}, ["noop"], "noop", None):
        assert_problem(api.post("/jobs", raw=json.dumps(bad).encode(), headers={
            "Content-Type": "application/json"}), 400, "bad_request")
    # Deep nesting: stored up to the 64 levels jobs.submit allows (the test's {"a": [...]} is
    # one level more than its brackets), then JB004 (413), and a 400 (never a 500) where the
    # parsers give up first.
    for depth, status in ((63, 202), (64, 413), (900, 413), (5000, 400)):
        nested = b'{"kind": "noop", "payload": {"a": ' + b"[" * depth + b"]" * depth + b"}}"
        deep = api.post("/jobs", raw=nested, headers={"Content-Type": "application/json"})
        assert deep.status == status, (depth, deep.status, deep.raw[:300])
    before += 1
    assert_problem(api.post("/jobs", {"kind": ""}), 400, "invalid_parameter_value", "22023")
    assert_problem(api.post("/jobs", {"kind": "noop"}, headers={"Idempotency-Key": ""}),
                   400, "invalid_parameter_value", "22023")
    nul = assert_problem(api.post("/jobs", {"kind": "noop", "payload": {"s": "a\u0000b"}}),
                         400, "invalid_input", "22P05")
    assert nul["detail"]
    assert_problem(api.post("/jobs", raw=b'{"kind": "noop", "payload": {"x": NaN}}', headers={
        "Content-Type": "application/json"}), 400, "invalid_input", "22P02")
    assert_problem(api.post("/jobs/fan-out", {"children": [{"kind": "noop", "ordering_key": "k"}],
                                              "then": {"kind": "noop", "ordering_key": "k"}}),
                   400, "invalid_parameter_value", "22023")
    assert_problem(api.post("/jobs/fan-out", {"children": [{"kind": "nosuchkind"}],
                                              "then": {"kind": "noop"}}),
                   422, "unknown_kind", "JB005")

    for path in ("/jobs/987654", "/jobs/987654/events", "/jobs/987654/children"):
        assert_problem(api.get(path), 404, "job_not_found", "JB002")
    assert_problem(api.post("/jobs/987654/cancel"), 404, "job_not_found", "JB002")
    assert_problem(admin(api).post("/jobs/987654/replay"), 404, "job_not_found", "JB002")
    assert_problem(api.post(f"/jobs/{existing}/replay"), 409, "illegal_transition", "JB003")
    for bad_id in ("0", "-1", "abc", "9223372036854775808"):
        assert_problem(api.get(f"/jobs/{bad_id}"), 400, "bad_request")
    assert_problem(api.get("/nowhere"), 404, "not_found")
    assert_problem(api.call("DELETE", f"/jobs/{existing}"), 405, "method_not_allowed")
    assert_problem(api.post(f"/jobs/{existing}/cancel", {"reason": 7}), 400, "bad_request")
    assert job_rows(declared) == before
    assert status_of(declared, existing) == "queued"


def test_bodies_are_capped_before_they_are_read(procs, declared):
    api = start_api(procs, "--max-body-bytes", "65536")
    before = job_rows(declared)
    # Content-Length over the cap: answered without a byte of the body being sent.
    with socket.create_connection(("127.0.0.1", api.port), timeout=10) as s:
        s.sendall(b"POST /jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                  b"Authorization: Bearer " + PRODUCER_TOKEN.encode() +
                  b"\r\nContent-Length: 10000000\r\n\r\n")
        head = _read_head(s)
    assert head.startswith(b"HTTP/1.1 413"), head
    assert b"body_too_large" in head
    # A streamed (chunked) body is counted as it arrives.
    with socket.create_connection(("127.0.0.1", api.port), timeout=10) as s:
        s.sendall(b"POST /jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                  b"Authorization: Bearer " + PRODUCER_TOKEN.encode() +
                  b"\r\nTransfer-Encoding: chunked\r\n\r\n")
        chunk = b'{"kind": "noop", "payload": {"x": "' + b"x" * 8000
        try:
            for _ in range(10):
                s.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                chunk = b"x" * 8000
        except OSError:
            pass  # the server may close as soon as it has answered
        head = _read_head(s)
    assert head.startswith(b"HTTP/1.1 413"), head
    # Just under the cap, the body is read and judged by the SQL (the kind's payload limit).
    under = api.post("/jobs", {"kind": "noop", "payload": {"x": "y" * 60000}})
    assert under.status == 202, under.raw
    over = api.post("/jobs", {"kind": "noop", "payload": {"x": "y" * 70000}})
    assert_problem(over, 413, "body_too_large")
    assert job_rows(declared) == before + 1


def _read_head(sock) -> bytes:
    data = b""
    deadline = time.monotonic() + 10
    while b"\r\n\r\n" not in data or len(data) < data.find(b"\r\n\r\n") + 40:
        if time.monotonic() > deadline:
            break
        try:
            more = sock.recv(65536)
        except OSError:
            break
        if not more:
            break
        data += more
    return data


# -- auth -------------------------------------------------------------------------------------
def test_tokens_scopes_and_that_no_token_is_ever_logged(api, declared):
    missing = api.post("/jobs", {"kind": "noop"}, token=None)
    assert_problem(missing, 401, "unauthorized")
    assert missing.headers["www-authenticate"].startswith("Bearer")
    wrong = "wrong-" + PRODUCER_TOKEN
    assert_problem(api.post("/jobs", {"kind": "noop"}, token=wrong), 401, "unauthorized")
    assert_problem(api.get("/jobs", token=PRODUCER_TOKEN[:-1]), 401, "unauthorized")
    assert_problem(api.get("/jobs", headers={"Authorization": f"Basic {PRODUCER_TOKEN}"},
                           token=None), 401, "unauthorized")
    assert job_rows(declared) == 0
    ok = api.post("/jobs", {"kind": "noop"})
    assert ok.status == 202
    job_id = ok.data["id"]
    for path in (f"/jobs/{job_id}", f"/jobs/{job_id}/events", "/jobs", "/queues"):
        assert api.get(path).status == 200, path
        assert_problem(api.get(path, token=None), 401, "unauthorized")
    assert_problem(api.get("/metrics"), 403, "forbidden")
    assert_problem(api.post(f"/jobs/{job_id}/replay"), 403, "forbidden")
    assert api.get("/metrics", token=ADMIN_TOKEN).status == 200
    assert api.post("/jobs", {"kind": "noop"}, token=ADMIN_TOKEN).status == 202
    assert api.get("/healthz", token=None).status == 200
    assert api.get("/openapi.json", token=None).status == 200

    log = api.proc.log_path.read_text()
    assert "request" in log and "api_listening" in log
    for secret in (PRODUCER_TOKEN, ADMIN_TOKEN, wrong):
        assert secret not in log
    assert ADMIN_TOKEN not in api.get("/metrics", token=ADMIN_TOKEN).raw.decode()


def _api_command(env_extra, *args, timeout=30):
    env = {k: v for k, v in os.environ.items() if k != "JOBFENCE_API_TOKENS"}
    env.update(env_extra)
    return subprocess.run([sys.executable, "-m", "jobfence", "api", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=timeout)


def test_the_api_refuses_to_start_without_tokens_unless_told(procs, declared):
    out = _api_command({"JOBFENCE_DATABASE_URL": declared}, "--port", "0")
    assert out.returncode == 2 and "JOBFENCE_API_TOKENS" in out.stderr and "--no-auth" in out.stderr
    secret = "s3cr3t-" + PRODUCER_TOKEN
    out = _api_command({"JOBFENCE_API_TOKENS": f"{secret}:root"}, "--port", "0")
    assert out.returncode == 2 and "unknown scope" in out.stderr and secret not in out.stderr
    out = _api_command({"JOBFENCE_API_TOKENS": TOKENS}, "--no-auth", "--port", "0")
    assert out.returncode == 2
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        out = _api_command({"JOBFENCE_API_TOKENS": TOKENS}, "--port", str(taken.getsockname()[1]))
    assert out.returncode == 2 and "address already in use" in out.stderr

    open_api = start_api(procs, "--no-auth", tokens=None, token=None)
    assert open_api.proc.find("auth_disabled", level="warning")
    assert open_api.post("/jobs", {"kind": "noop"}).status == 202
    assert open_api.get("/metrics").status == 200


# -- metrics, OpenAPI ---------------------------------------------------------------------------
def test_metrics_serve_the_sql_collector_and_the_api_counters(api, declared):
    api.post("/jobs", {"kind": "noop"})
    api.post("/jobs", {"kind": "nosuchkind"})
    text = api.get("/metrics", token=ADMIN_TOKEN).raw.decode()
    families = {f.name: f for f in text_string_to_metric_families(text)}
    assert families["jobfence_up"].samples[0].value == 1.0
    requests = {(s.labels["route"], s.labels["status"]): s.value
                for s in families["jobfence_api_requests"].samples if s.name.endswith("_total")}
    assert requests[("/jobs", "202")] == 1 and requests[("/jobs", "422")] == 1
    assert "jobfence_api_request_duration_seconds" in families
    assert any(s.labels.get("kind") == "noop" for s in families["jobfence_queue_depth"].samples)
    from test_exporter import Scrape, documented_names

    exposed = Scrape(text).jobfence_names()
    assert exposed <= documented_names(), sorted(exposed - documented_names())


def test_the_served_openapi_document_is_the_committed_one(api):
    served = api.get("/openapi.json", token=None)
    assert served.status == 200
    committed = json.loads(OPENAPI.read_text())
    assert served.data == committed, ("docs/openapi.json is stale: regenerate it with "
                                      "`jobfence api --print-openapi > docs/openapi.json`")
    printed = subprocess.run([sys.executable, "-m", "jobfence", "api", "--print-openapi"],
                             cwd=REPO, capture_output=True, text=True, timeout=60)
    assert printed.returncode == 0 and printed.stdout == OPENAPI.read_text()
    paths = committed["paths"]
    for path, method in (("/jobs", "post"), ("/jobs/batch", "post"), ("/jobs/fan-out", "post"),
                         ("/jobs/{job_id}", "get"), ("/jobs/{job_id}/events", "get"),
                         ("/jobs/{job_id}/children", "get"), ("/jobs/{job_id}/cancel", "post"),
                         ("/jobs/{job_id}/replay", "post"), ("/jobs", "get"),
                         ("/queues", "get"), ("/healthz", "get"), ("/metrics", "get")):
        assert method in paths[path], (path, method)
        assert "422" not in paths[path][method]["responses"] or path in (
            "/jobs", "/jobs/batch", "/jobs/fan-out")


# -- jobfence run -----------------------------------------------------------------------------
def test_run_starts_the_api_as_a_child_and_refuses_an_open_public_api(declared, redis_url):
    from jobfence.runner import build_children

    children = build_children(app="jobfence.examples:app", workers=1, concurrency=4, batch=10,
                              log_format="json", log_level="INFO", reaper_interval=1.0,
                              stale_after=1.0, grace=5.0, queues=[], api_port=8123,
                              api_no_auth=True)
    api_child = next(c for c in children if c.name == "api")
    assert api_child.argv[-6:] == ["api", "--host", "127.0.0.1", "--port", "8123", "--no-auth"]
    env = {k: v for k, v in os.environ.items() if k != "JOBFENCE_API_TOKENS"}
    env.update(JOBFENCE_DATABASE_URL=declared, JOBFENCE_REDIS_URL=redis_url)
    out = subprocess.run([sys.executable, "-m", "jobfence", "run", "--api-host", "0.0.0.0"],
                         cwd=REPO, env=env, capture_output=True, text=True, timeout=30)
    assert out.returncode == 2 and "JOBFENCE_API_TOKENS" in out.stderr, out.stderr


def test_run_serves_the_api_next_to_the_workers(declared, redis_url, tmp_path):
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k != "JOBFENCE_API_TOKENS"}
    env.update(JOBFENCE_DATABASE_URL=declared, JOBFENCE_REDIS_URL=redis_url)
    log = open(tmp_path / "run.log", "w")
    run = subprocess.Popen([sys.executable, "-m", "jobfence", "--log-format", "json", "run",
                            "--workers", "1", "--api-port", str(port), "--grace", "2"],
                           cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        from api_helpers import Api

        api = Api(None, port, token=None)

        def listening():
            lines = [json.loads(x) for x in open(tmp_path / "run.log") if x.startswith("{")]
            return any(x.get("event") == "api_listening" for x in lines) and \
                any(x.get("event") == "worker_ready" for x in lines)

        wait_until(listening, 30, what="api and worker ready")
        job = api.post("/jobs", {"kind": "noop"})
        assert job.status == 202, job.raw
        assert api.get(f"/jobs/{job.data['id']}?wait=30").data["status"] == "done"
        lines = [json.loads(x) for x in open(tmp_path / "run.log") if x.startswith("{")]
        assert any(x.get("event") == "auth_disabled" for x in lines)
    finally:
        run.terminate()
        assert run.wait(30) == 0
        log.close()
    with psycopg.connect(declared, autocommit=True) as c:
        assert c.execute("SELECT count(*) FROM jobs.job WHERE status = 'done'").fetchone()[0] == 1


# -- request hygiene --------------------------------------------------------------------------
def test_a_request_is_one_log_line_whatever_its_path_holds(api):
    for path in ("/x%0a12:00:00.000%20ERROR%20forged", "/x%00y", "/x%0d%1b[31m"):
        assert_problem(api.get(path), 404, "not_found")

    def logged():
        return [e["path"] for e in api.proc.find("request") if e["path"].startswith("/x")]

    # The line is written once the answer has left: wait for it rather than race it.
    wait_until(lambda: len(logged()) == 3, 10, what="three request lines")
    raw = api.proc.log_path.read_bytes()
    assert b"\x00" not in raw and b"\x1b" not in raw
    assert not [line for line in raw.splitlines() if line.startswith(b"12:00")]
    paths = logged()
    for path in paths:
        # The JSON line decodes to the path as sent: percent-encoded, nothing unprintable.
        assert path.isprintable() and "%0a" in paths[0], paths


def test_the_token_is_checked_before_the_body_or_the_query_is_read(api, declared):
    for raw, content_type in ((b'{"kind": "noop",', "application/json"),
                              (b"\xff\xfe", "application/json"),
                              (b"kind=noop", "application/x-www-form-urlencoded")):
        answer = api.post("/jobs", raw=raw, headers={"Content-Type": content_type}, token=None)
        assert_problem(answer, 401, "unauthorized")
        assert "JSON" not in answer.data["detail"]
    assert_problem(api.get("/jobs?statuss=failed", token=None), 401, "unauthorized")
    assert_problem(api.post("/jobs/1/replay?x=1", raw=b"{", headers={
        "Content-Type": "application/json"}), 403, "forbidden")
    assert_problem(api.post("/jobs/1/cancel", raw=b"{", headers={
        "Content-Type": "application/json"}, token=None), 401, "unauthorized")
    assert job_rows(declared) == 0


def test_a_non_ascii_idempotency_key_is_the_same_in_a_header_and_in_a_body(api, declared):
    key = "facture:é-42"
    first = api.post("/jobs", {"kind": "noop"}, headers={"Idempotency-Key": key.encode()})
    assert first.status == 202, first.raw
    assert api.get(f"/jobs/{first.data['id']}").data["idempotency_key"] == key
    batch = api.post("/jobs/batch", {"jobs": [{"kind": "noop", "idempotency_key": key}]})
    assert batch.data["jobs"][0] == {**batch.data["jobs"][0], "id": first.data["id"],
                                     "created": False}
    bad = assert_problem(api.post("/jobs", {"kind": "noop"},
                                  headers={"Idempotency-Key": b"\xff\xfekey"}),
                         400, "bad_request")
    assert bad["errors"] == [{"location": "header.Idempotency-Key", "message": "not valid UTF-8"}]
    assert job_rows(declared) == 1


def test_only_json_bodies_are_read(api, declared):
    body = b'{"kind": "noop"}'
    for content_type in ("application/json", "application/json; charset=utf-8",
                         "Application/JSON; charset=UTF-8"):
        answer = api.post("/jobs", raw=body, headers={"Content-Type": content_type})
        assert answer.status == 202, (content_type, answer.raw)
    for content_type in ("application/merge-patch+json", "text/plain", "application/xml",
                         "application/json; charset=latin-1", "multipart/form-data; boundary=x"):
        refused = assert_problem(api.post("/jobs", raw=body, headers={
            "Content-Type": content_type}), 415, "unsupported_media_type")
        assert refused["errors"][0]["location"] == "header.Content-Type", refused
    assert_problem(api.post("/jobs/1/cancel", raw=b'{"reason": "x"}', headers={
        "Content-Type": "text/plain"}), 415, "unsupported_media_type")
    assert job_rows(declared) == 3


def test_every_bad_request_lists_where_and_nul_is_22P05(api, declared):
    not_utf8 = assert_problem(api.post("/jobs", raw=b'{"kind": "no\xffop"}', headers={
        "Content-Type": "application/json"}), 400, "bad_request")
    assert not_utf8["errors"] == [{"location": "body",
                                   "message": "not valid UTF-8 (byte offset 12)"}]
    malformed = assert_problem(api.post("/jobs", raw=b'{"kind": "noop",', headers={
        "Content-Type": "application/json"}), 400, "bad_request")
    assert malformed["errors"][0]["location"] == "body"
    assert "line 1 column" in malformed["errors"][0]["message"]
    deep = b'{"kind": "noop", "payload": {"a": ' + b"[" * 5000 + b"]" * 5000 + b"}}"
    nested = assert_problem(api.post("/jobs", raw=deep, headers={
        "Content-Type": "application/json"}), 400, "bad_request")
    assert nested["errors"] == [{"location": "body", "message": "JSON nested too deeply"}]
    assert_problem(api.post("/jobs", {"kind": 5}), 400, "bad_request")["errors"][0][
        "location"] == "body.kind"
    existing = api.post("/jobs", {"kind": "noop", "run_after": 3600}).data["id"]
    for answer in (api.post("/jobs", {"kind": "no\u0000op"}),
                   api.post("/jobs", {"kind": "noop", "ordering_key": "a\u0000"}),
                   api.post("/jobs/batch", {"jobs": [{"kind": "noop",
                                                      "idempotency_key": "k\u0000"}]}),
                   api.post(f"/jobs/{existing}/cancel", {"reason": "r\u0000"})):
        nul = assert_problem(answer, 400, "invalid_input", "22P05")
        assert nul["detail"]
    assert job_rows(declared) == 1 and status_of(declared, existing) == "queued"


def test_query_strings_are_checked(api):
    job_id = api.post("/jobs", {"kind": "noop", "run_after": 3600}).data["id"]
    typo = assert_problem(api.get("/jobs?statuss=failed"), 400, "bad_request")
    assert "statuss" in typo["detail"]
    assert typo["errors"] == [{"location": "query.statuss", "message": "unknown query parameter"}]
    started = time.monotonic()
    assert "wiat" in assert_problem(api.get(f"/jobs/{job_id}?wiat=30"), 400,
                                    "bad_request")["detail"]
    assert time.monotonic() - started < 5
    twice = assert_problem(api.get("/jobs?limit=1&limit=2"), 400, "bad_request")
    assert twice["errors"] == [{"location": "query.limit", "message": "given more than once"}]
    bad_kind = assert_problem(api.get("/jobs?kind=Bad%20Kind"), 400, "invalid_parameter_value",
                              "22023")
    assert "malformed" in bad_kind["detail"] and bad_kind["hint"]
    for wait in ("nan", "inf", "-inf"):
        message = assert_problem(api.get(f"/jobs/{job_id}?wait={wait}"), 400, "bad_request")
        assert "finite" in message["detail"], message
    assert_problem(api.get("/queues?verbose=1"), 400, "bad_request")
    assert_problem(api.post("/jobs?kind=noop", {"kind": "noop"}), 400, "bad_request")
    assert api.get("/jobs?kind=noop&status=queued&limit=5").status == 200
    # Probes may add cache-busting parameters.
    assert api.get("/healthz?probe=1", token=None).status == 200


def test_methods_allow_headers_head_and_trailing_slashes(api):
    job_id = api.post("/jobs", {"kind": "noop"}).data["id"]
    for method, path, allowed in (("DELETE", "/jobs", "GET, HEAD, POST"),
                                  ("PUT", f"/jobs/{job_id}", "GET, HEAD"),
                                  ("GET", f"/jobs/{job_id}/replay", "POST"),
                                  ("HEAD", f"/jobs/{job_id}/cancel", "POST"),
                                  ("OPTIONS", "/healthz", "GET, HEAD")):
        answer = api.call(method, path)
        assert answer.status == 405, (method, path, answer.status)
        assert answer.headers["allow"] == allowed, (method, path, answer.headers)
        if method != "HEAD":
            assert_problem(answer, 405, "method_not_allowed")
    head = api.call("HEAD", "/healthz", token=None)
    assert head.status == 200 and head.raw == b"", head
    assert head.headers["content-type"] == "application/json"
    assert api.call("HEAD", f"/jobs/{job_id}").status == 200
    assert api.call("HEAD", f"/jobs/{job_id}", token=None).status == 401
    assert api.call("HEAD", "/jobs/987654").status == 404
    for method, path in (("GET", "/jobs/"), ("POST", "/jobs/"), ("GET", f"/jobs/{job_id}/")):
        answer = api.call(method, path, body={"kind": "noop"} if method == "POST" else None)
        assert_problem(answer, 404, "not_found")
        assert "location" not in answer.headers
    admin(api)
    requests = {(s.labels["method"], s.labels["route"], s.labels["status"])
                for s in text_string_to_metric_families(api.get("/metrics").raw.decode())
                if s.name == "jobfence_api_requests" for s in s.samples}
    assert ("HEAD", "/jobs/{job_id}", "200") in requests, requests


# -- Redis and PostgreSQL trouble ---------------------------------------------------------------
class SilentServer:
    """Accepts TCP connections and never answers: a Redis that hangs."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.held = []
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.held.append(conn)

    def close(self):
        self.sock.close()
        for conn in self.held:
            conn.close()


def test_a_silent_redis_costs_one_short_timeout_not_one_per_request(procs, declared):
    silent = SilentServer()
    try:
        api = start_api(procs, name="api-silent", redis_url=f"redis://127.0.0.1:{silent.port}/0")
        took, ids = [], []
        for n in range(6):
            started = time.monotonic()
            answer = api.post("/jobs", {"kind": "noop", "payload": {"n": n}})
            took.append(time.monotonic() - started)
            assert answer.status == 202 and answer.data["enqueued"] is False, answer.raw
            ids.append(answer.data["id"])
        # The first waits for the push timeout; the next ones do not try Redis at all.
        assert took[0] < 3, took
        assert max(took[1:]) < 0.5, took
        assert {status_of(declared, i) for i in ids} == {"enqueue_failed"}
        assert api.proc.find("enqueue_skipped", level="warning")
        health = api.get("/healthz", token=None)
        assert health.status == 200 and health.data["degraded"] is True, health.raw
    finally:
        silent.close()


def _enqueue_failed_count(api) -> float:
    text = api.get("/metrics", token=ADMIN_TOKEN).raw.decode()
    return sum(s.value for f in text_string_to_metric_families(text) for s in f.samples
               if s.name == "jobfence_api_enqueue_failed_total")


def test_enqueued_says_whether_the_signal_is_in_redis(procs, declared):
    offline = start_api(procs, name="api-offline", redis_url=f"redis://127.0.0.1:{closed_port()}/0")
    first = offline.post("/jobs", {"kind": "noop"}, headers={"Idempotency-Key": "k1"})
    again = offline.post("/jobs", {"kind": "noop"}, headers={"Idempotency-Key": "k1"})
    assert first.status == 202 and again.status == 200, (first.raw, again.raw)
    assert again.data["status"] == "enqueue_failed" and again.data["enqueued"] is False
    assert "reaper" in again.data["detail"]
    batch = offline.post("/jobs/batch", {"jobs": [{"kind": "noop", "idempotency_key": "k1"}]})
    assert batch.data["enqueued"] is False and "reaper" in batch.data["detail"]
    # A job is counted as parked once, by the request that created it: a key repeated
    # inside one batch is one job.
    parked = _enqueue_failed_count(offline)
    twice = offline.post("/jobs/batch", {"jobs": [{"kind": "noop", "idempotency_key": "k2"}] * 2})
    assert [j["created"] for j in twice.data["jobs"]] == [True, False], twice.raw
    assert _enqueue_failed_count(offline) == parked + 1

    family = offline.post("/jobs/fan-out", {"children": [{"kind": "noop"}, {"kind": "noop"}],
                                            "then": {"kind": "noop"}})
    assert family.status == 202, family.raw
    body = family.data
    assert body["status"] == "queued" and body["enqueued"] is False
    children = [c["id"] for c in body["children"]]
    assert {c["status"] for c in body["children"]} == {"enqueue_failed"}
    assert f"jobs {children[0]}, {children[1]} (2) are" in body["detail"], body["detail"]
    assert str(body["id"]) not in body["detail"].split("(")[0]


def test_healthz_is_503_only_when_postgresql_is_down(procs, declared):
    down = start_api(procs, name="api-nodb",
                     env={"JOBFENCE_DATABASE_URL": f"postgresql://127.0.0.1:{closed_port()}/x"})
    health = down.get("/healthz", token=None)
    problem = assert_problem(health, 503, "unavailable")
    assert problem["detail"] == "PostgreSQL does not answer" and problem["checks"]["redis"] == "ok"
    assert down.call("HEAD", "/healthz", token=None).status == 503


# -- the document -------------------------------------------------------------------------------
def test_numbers_beyond_the_double_range_are_400_and_change_nothing(api, declared):
    # Python refuses the 5001 digits of 1e5000 written out; 1e5000 itself parses as inf; a
    # 401-digit integer reaches the SQL, which refuses it (22003).
    json_body = {"Content-Type": "application/json"}
    before = job_rows(declared)
    for raw in (b'{"kind": "noop", "payload": {"x": 1' + b"0" * 5000 + b"}}",
                b'{"kind": "noop", "payload": {"x": 1e5000}}',
                b'{"kind": "noop", "payload": {"x": -1e400}}'):
        refused = assert_problem(api.post("/jobs", raw=raw, headers=json_body), 400, "bad_request")
        assert refused["errors"][0]["location"] == "body"
        assert "double range" in refused["detail"], refused
        assert "set_int_max_str_digits" not in refused["detail"]
    by_sql = assert_problem(api.post("/jobs", {"kind": "noop", "payload": {"x": 10 ** 400}}),
                            400, "numeric_value_out_of_range", "22003")
    assert "double range" in by_sql["detail"] and by_sql["hint"]
    batch = assert_problem(api.post("/jobs/batch", {"jobs": [{"kind": "noop"}, {
        "kind": "noop", "payload": {"x": -(10 ** 400)}}]}), 400, "numeric_value_out_of_range",
        "22003")
    assert "specs[1]" in batch["detail"], batch
    assert job_rows(declared) == before


def test_a_stored_value_python_cannot_decode_is_served_as_its_json_text(api, procs, declared):
    # Written past jobs.submit (which refuses it now): 1e5000 is stored as 5001 digits.
    poisoned = api.post("/jobs", {"kind": "noop", "payload": {"n": 1}}).data["id"]
    others = [api.post("/jobs", {"kind": "noop", "payload": {"n": n}}).data["id"]
              for n in range(3)]
    with psycopg.connect(declared, autocommit=True) as c:
        c.execute("""UPDATE jobs.job SET payload = '{"x": 1e5000}', result = '[-1e5000]',
                                         progress = '{"eta": 1e5000}' WHERE id = %s""",
                  (poisoned,))
    answer = api.get(f"/jobs/{poisoned}")
    assert answer.status == 200, answer.raw[:300]
    job = answer.data
    assert job["payload"] == '{"x": 1' + "0" * 5000 + "}"
    assert job["result"].startswith("[-1000") and job["progress"].startswith('{"eta": 1000')
    _conforms(json.loads(OPENAPI.read_text()), "JobView", job)
    seen, path = [], "/jobs?limit=2"
    while path:
        page = api.get(path)
        assert page.status == 200, page.raw[:300]
        seen += [j["id"] for j in page.data["jobs"]]
        path = page.data["next"]
    assert seen == sorted(others + [poisoned], reverse=True)
    # The dashboard's pages read the same rows.
    ui = start_api(procs, "--no-auth", name="api-open", tokens=None, token=None)
    for path in ("/ui/jobs", f"/ui/jobs/{poisoned}"):
        page = ui.get(path, headers={"Accept": "text/html"})
        assert page.status == 200, (path, page.status, page.raw[:300])
    assert b"1" + b"0" * 5000 in ui.get(f"/ui/jobs/{poisoned}").raw


def _conforms(doc, schema_name, instance):
    import jsonschema_rs

    schema = {"$ref": f"#/components/schemas/{schema_name}", "components": doc["components"]}
    errors = [str(e) for e in jsonschema_rs.validator_for(schema).iter_errors(instance)]
    assert not errors, (schema_name, errors, instance)


def test_answers_are_what_the_document_describes(api, declared):
    doc = json.loads(OPENAPI.read_text())
    job_id = api.post("/jobs", {"kind": "noop", "run_after": 3600}).data["id"]
    _conforms(doc, "JobView", api.get(f"/jobs/{job_id}").data)
    assert {"lease_timeout", "timeout"} <= set(api.get(f"/jobs/{job_id}").data)
    _conforms(doc, "JobPage", api.get("/jobs").data)
    _conforms(doc, "Health", api.get("/healthz", token=None).data)
    _conforms(doc, "Queues", admin(api).get("/queues").data)
    api.post(f"/jobs/{job_id}/cancel")
    for answer in (api.post(f"/jobs/{job_id}/cancel"), api.get("/jobs?limit=0"),
                   api.post("/jobs", {"kind": "nosuchkind"}), api.get("/jobs?x=1"),
                   api.post("/jobs", raw=b"x", headers={"Content-Type": "text/plain"})):
        assert answer.status >= 400
        _conforms(doc, "Problem", answer.data)
    cancel = doc["paths"]["/jobs/{job_id}/cancel"]["post"]["responses"]
    assert {"413", "415"} <= set(cancel)
    problem = doc["components"]["schemas"]["Problem"]["properties"]
    assert {"hint", "errors", "checks", "job_status"} <= set(problem)


def test_the_http_doc_examples_use_kinds_jobfence_run_declares():
    import re

    from jobfence.examples import app as examples

    text = (REPO / "docs" / "http.md").read_text()
    used = set(re.findall(r'"kind":\s*"([^"]+)"', text))
    assert used - {"nosuchkind"} <= set(examples.tasks), sorted(used - set(examples.tasks))
