"""Dependencies between jobs (docs/sql-api.md, "Dependencies") end to end: a graph submitted
through the Python client and the HTTP API, run by a real worker over Redis, each job claimed
only after its dependencies are done, and a failure handled per policy."""

from __future__ import annotations

import pytest

from api_helpers import start_api
from jobfence.errors import InvalidParameter


def _claimed_at(conn, job_id):
    return conn.execute("SELECT at FROM jobs.history WHERE job_id = %s AND reason = 'claimed' "
                        "ORDER BY id LIMIT 1", (job_id,)).fetchone()[0]


def _finished_at(conn, job_id):
    return conn.execute("SELECT finished_at FROM jobs.job WHERE id = %s", (job_id,)).fetchone()[0]


def test_a_graph_runs_in_dependency_order_and_a_failure_follows_each_policy(procs, client, conn):
    extract, transform, load = client.submit_many([
        {"kind": "sleep", "payload": {"seconds": 0.2}},
        {"kind": "noop", "payload": {"step": "transform"}, "depends_on": [{"spec": 0}]},
        {"kind": "noop", "payload": {"step": "load"}, "depends_on": [{"spec": 1}, {"spec": 0}]},
    ])
    broken = client.submit("flaky", {"fail_times": 99})
    failed_with = client.submit("noop", {"after": "broken"}, depends_on=[broken])
    runs_anyway = client.submit("noop", {"after": "broken"}, depends_on=[broken, load],
                                on_dependency_failure="run")
    waits = client.submit("noop", {"after": "broken"}, depends_on=[broken], on_dependency_failure="wait")
    assert client.get(transform).pending_children == 1 and client.get(load).pending_children == 2
    assert client.get(load).has_dependents and not client.get(failed_with).has_dependents

    procs.worker("w1", "--no-declare")
    for job_id in (extract, transform, load, runs_anyway):
        assert client.wait(job_id, timeout=60).status == "done", client.get(job_id)
    # Each job was claimed only after the jobs it depends on had finished.
    assert _claimed_at(conn, transform) >= _finished_at(conn, extract)
    assert _claimed_at(conn, load) >= _finished_at(conn, transform)
    assert _claimed_at(conn, runs_anyway) >= max(_finished_at(conn, broken), _finished_at(conn, load))

    failed = client.wait(failed_with, timeout=30)
    assert (failed.status, failed.error) == ("failed", f"dependency {broken} failed")
    assert [e.reason for e in client.events(failed_with)] == ["submitted", "dependency_failed"]
    assert [e.reason for e in client.events(transform)][:2] == ["submitted", "released"]
    assert client.get(waits).status == "queued" and client.get(waits).pending_children == 1
    rows = conn.execute("SELECT job_id, released_at IS NOT NULL FROM jobs.dependents(%s) ORDER BY job_id",
                        (broken,)).fetchall()
    assert rows == [(failed_with, True), (runs_anyway, True), (waits, False)]
    assert conn.execute("SELECT count(*) FROM jobs.audit() WHERE violations > 0").fetchone()[0] == 0


def test_bad_dependencies_are_refused_and_submit_nothing(client, conn):
    before = conn.execute("SELECT count(*) FROM jobs.job").fetchone()[0]
    with pytest.raises(InvalidParameter, match="depends_on names unknown job 987654321"):
        client.submit("noop", depends_on=[987654321])
    with pytest.raises(InvalidParameter, match="on_dependency_failure"):
        client.submit_many([{"kind": "noop"}, {"kind": "noop", "depends_on": [{"spec": 0}],
                                               "on_dependency_failure": "later"}])
    with pytest.raises(InvalidParameter, match="cycle"):
        client.submit_many([{"kind": "noop", "depends_on": [{"spec": 0}]}])
    # A single submit has no earlier spec to name.
    with pytest.raises(InvalidParameter, match="single submit") as single:
        client.submit("noop", depends_on=[{"spec": 0}])
    assert single.value.hint and "submit_many" in single.value.hint
    assert conn.execute("SELECT count(*) FROM jobs.job").fetchone()[0] == before


def test_http_api_takes_dependencies_by_id_and_by_position(procs, declared):
    api = start_api(procs)
    first = api.post("/jobs", {"kind": "noop"})
    assert first.status == 202, first.raw
    batch = api.post("/jobs/batch", {"jobs": [
        {"kind": "noop", "depends_on": [first.data["id"]]},
        {"kind": "noop", "depends_on": [{"spec": 0}], "on_dependency_failure": "wait"}]})
    assert batch.status == 202, batch.raw
    second, third = (j["id"] for j in batch.data["jobs"])
    got = api.get(f"/jobs/{third}")
    assert got.data["pending_children"] == 1 and got.data["has_dependents"] is False, got.raw
    assert api.get(f"/jobs/{second}").data["has_dependents"] is True
    for body in ({"kind": "noop", "depends_on": []}, {"kind": "noop", "depends_on": ["1"]},
                 {"kind": "noop", "depends_on": [{"spec": 0}]},
                 {"kind": "noop", "depends_on": [987654321]},
                 {"kind": "noop", "on_dependency_failure": "run"},
                 {"kind": "noop", "depends_on": [first.data["id"]], "on_dependency_failure": "later"}):
        refused = api.post("/jobs", body)
        assert refused.status == 400, (body, refused.raw)
