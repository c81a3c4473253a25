"""Upgrading a deployed schema from the last release (docs/upgrading.md).

A tagged release is frozen: the scripts a deploy up to its tag runs are the ones it shipped
(db/released/TAG.sums), so a change to a released object must be a `sqitch rework`. And a
database deployed at the tag, holding jobs in flight, upgrades to HEAD with nothing lost:
the leases granted before the upgrade are completed after it, the history stays legal, and
the upgraded schema is the one a fresh deploy of HEAD makes."""

from __future__ import annotations

import subprocess

import psycopg
import pytest
from psycopg.rows import dict_row

from conftest import REPO, sqitch_target
from schema_helpers import catalog


def _tags() -> list[str]:
    from jobfence.schema_files import plan_tags

    return plan_tags(REPO)


def _sqitch(*args: str) -> subprocess.CompletedProcess:
    done = subprocess.run(["sqitch", "--quiet", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, f"sqitch {' '.join(args)}:\n{done.stdout}{done.stderr}"
    return done


def test_the_plan_has_a_release_tag():
    assert _tags(), "sqitch.plan carries no tag: the first release is v0.1.0"
    assert _tags()[0] == "v0.1.0"


@pytest.mark.parametrize("tag", _tags())
def test_the_scripts_of_a_release_are_the_ones_it_shipped(tag):
    from jobfence.schema_files import released_sums

    shipped = (REPO / "db" / "released" / f"{tag}.sums").read_text().splitlines()
    today = released_sums(REPO, tag)
    assert [line.split()[:2] for line in today] == [line.split()[:2] for line in shipped], (
        "the changes up to the tag differ from the ones it released: a released plan line "
        "was edited, moved or removed")
    edited = [" ".join(line.split()[:2]) for line, was in zip(today, shipped) if line != was]
    assert not edited, (
        f"released scripts edited in place: {edited}. A released object changes with "
        "`sqitch rework CHANGE` (docs/upgrading.md), never by editing its script")


def test_a_database_at_the_last_release_upgrades_to_head_with_its_jobs_in_flight(
        scratch_databases):
    tag = _tags()[-1]
    url = scratch_databases()
    _sqitch("deploy", "--verify", "--to", f"@{tag}", sqitch_target(url))
    with psycopg.connect(url, autocommit=True, row_factory=dict_row) as conn:
        conn.execute("SELECT jobs.configure_redis('upgrade')")
        conn.execute("SELECT jobs.define_type('upgrade.k', max_retries => 2)")
        ids = [conn.execute("SELECT id FROM jobs.submit('upgrade.k', %s::jsonb, notify => false)",
                            (f'{{"n": {n}}}',)).fetchone()["id"] for n in range(4)]
        fenced = conn.execute("SELECT * FROM jobs.claim_with_token(%s, 'w-old')",
                              (ids[0],)).fetchone()
        plain = conn.execute("SELECT * FROM jobs.claim(%s, 'w-old')", (ids[1],)).fetchone()
        assert fenced and plain
        conn.execute("SELECT * FROM jobs.cancel(%s)", (ids[3],))

    _sqitch("deploy", "--verify", sqitch_target(url))
    status = _sqitch("status", sqitch_target(url))
    assert "Nothing to deploy (up-to-date)" in status.stdout, status.stdout

    with psycopg.connect(url, autocommit=True, row_factory=dict_row) as conn:
        # The leases granted by the released schema hold after the upgrade, tokens included.
        conn.execute("SELECT * FROM jobs.complete(%s, 'w-old', %s, '{\"ok\": 1}', %s::uuid)",
                     (ids[0], fenced["lease_version"], fenced["token"]))
        conn.execute("SELECT * FROM jobs.fail(%s, 'w-old', %s, 'after the upgrade', true)",
                     (ids[1], plain["lease_version"]))
        with pytest.raises(psycopg.Error) as stale:
            conn.execute("SELECT * FROM jobs.complete(%s, 'w-old', %s, NULL, %s::uuid)",
                         (ids[0], fenced["lease_version"], fenced["token"]))
        assert stale.value.sqlstate == "JB001"
        # The queued and the retried jobs are claimed and finished by HEAD's functions.
        conn.execute("UPDATE jobs.job SET run_after = now() WHERE id = %s", (ids[1],))
        leases = conn.execute("SELECT * FROM jobs.claim_next_with_token('w-new', NULL, 10)"
                              ).fetchall()
        assert sorted(lease["job_id"] for lease in leases) == [ids[1], ids[2]]
        for lease in leases:
            conn.execute("SELECT * FROM jobs.complete(%s, 'w-new', %s, NULL, %s::uuid)",
                         (lease["job_id"], lease["lease_version"], lease["token"]))
        statuses = {r["id"]: r["status"] for r in conn.execute(
            "SELECT id, status FROM jobs.job WHERE id = ANY(%s)", (ids,))}
        assert statuses == {ids[0]: "done", ids[1]: "done", ids[2]: "done",
                            ids[3]: "failed"}, statuses  # a cancelled job ends failed
        broken = conn.execute("SELECT * FROM jobs.audit() WHERE violations > 0").fetchall()
        assert not broken, broken
        # The release recorded each submission as a jobs.event row; HEAD reads it from the
        # job row (docs/design.md "What is recorded where"): one per job, first, all the same.
        _one_submission_each(conn, ids)
        assert conn.execute("SELECT count(*) AS n FROM jobs.event WHERE reason = 'submitted'"
                            ).fetchone()["n"] == 0

    fresh = scratch_databases()
    _sqitch("deploy", "--verify", sqitch_target(fresh))
    upgraded, deployed = catalog(url), catalog(fresh)
    assert upgraded == deployed, sorted(set(upgraded) ^ set(deployed))[:20]


def _one_submission_each(conn, ids):
    for job_id in ids:
        reasons = [e["reason"] for e in conn.execute("SELECT reason FROM jobs.events(%s)", (job_id,))]
        assert reasons[:1] == ["submitted"] and reasons.count("submitted") == 1, (job_id, reasons)


def test_reverting_the_submission_on_the_row_writes_the_submissions_back(scratch_databases):
    """Reverting event_submitted_on_job puts a submitted row back into jobs.event for every
    job, first in its history, and deploying it again takes them out: no history loses or
    doubles its submission either way."""
    url = scratch_databases()
    _sqitch("deploy", sqitch_target(url))
    with psycopg.connect(url, autocommit=True, row_factory=dict_row) as conn:
        conn.execute("SELECT jobs.define_type('upgrade.back')")
        ids = [conn.execute("SELECT id FROM jobs.submit('upgrade.back', notify => false)").fetchone()["id"]
               for _ in range(3)]
        lease = conn.execute("SELECT * FROM jobs.claim(%s, 'w')", (ids[0],)).fetchone()
        conn.execute("SELECT * FROM jobs.complete(%s, 'w', %s, NULL)", (ids[0], lease["lease_version"]))
    _sqitch("revert", "-y", "--to", "event_submitted_on_job^", sqitch_target(url))
    with psycopg.connect(url, autocommit=True, row_factory=dict_row) as conn:
        rows = conn.execute("SELECT id, job_id FROM jobs.event WHERE reason = 'submitted' ORDER BY job_id").fetchall()
        assert [(r["id"], r["job_id"]) for r in rows] == [(-i, i) for i in ids]
        _one_submission_each(conn, ids)
        assert [e["reason"] for e in conn.execute("SELECT reason FROM jobs.events(%s)", (ids[0],))] == [
            "submitted", "claimed", "completed"]
    _sqitch("deploy", sqitch_target(url))
    with psycopg.connect(url, autocommit=True, row_factory=dict_row) as conn:
        _one_submission_each(conn, ids)
        assert conn.execute("SELECT count(*) AS n FROM jobs.event WHERE reason = 'submitted'").fetchone()["n"] == 0
        assert not conn.execute("SELECT * FROM jobs.audit() WHERE violations > 0").fetchall()


# The changes that decide whether a lease write's token is the lease's.
TOKEN_CHECKS = {"lease_tokens", "finish_leases", "extend_leases"}


def test_a_lease_granted_at_the_last_release_holds_at_every_step_of_the_upgrade(scratch_databases):
    """sqitch deploys an upgrade change by change, each in its own transaction, while the
    workers run (docs/upgrading.md, "Changing a signature: expand and contract"). After each
    change since the release that touches the token check, the leases granted under the
    release still beat with their tokens, and one of them ends."""
    from jobfence.schema_files import plan_steps

    tag = _tags()[-1]
    steps = [s.change for s in plan_steps(REPO) if s.tag == tag and s.change in TOKEN_CHECKS]
    if not steps:
        pytest.skip(f"no change since {tag} touches the token check")
    url = scratch_databases()
    _sqitch("deploy", "--to", f"@{tag}", sqitch_target(url))
    with psycopg.connect(url, autocommit=True, row_factory=dict_row) as conn:
        conn.execute("SELECT jobs.define_type('upgrade.steps')")
        ids = [conn.execute("SELECT id FROM jobs.submit('upgrade.steps', notify => false)").fetchone()["id"]
               for _ in steps]
        leases = conn.execute("SELECT * FROM jobs.claim_many_with_token(%s, 'w-old')", (ids,)).fetchall()
    assert len(leases) == len(steps)
    for n, change in enumerate(steps):
        _sqitch("deploy", "--to", f"{change}@HEAD", sqitch_target(url))
        held = leases[n:]
        with psycopg.connect(url, autocommit=True, row_factory=dict_row) as conn:
            beats = conn.execute(
                "SELECT job_id, held FROM jobs.heartbeat_many(%s, 'w-old', %s, %s::uuid[])",
                ([lease["job_id"] for lease in held], [lease["lease_version"] for lease in held],
                 [lease["token"] for lease in held])).fetchall()
            assert [b["held"] for b in beats] == [True] * len(held), (change, beats)
            ended = conn.execute("SELECT * FROM jobs.complete(%s, 'w-old', %s, NULL, %s::uuid)",
                                 (held[0]["job_id"], held[0]["lease_version"], held[0]["token"])).fetchone()
            assert ended["accepted"], (change, ended)
    with psycopg.connect(url, autocommit=True) as conn:
        done = conn.execute("SELECT count(*) FROM jobs.job WHERE id = ANY(%s) AND status = 'done'", (ids,)).fetchone()[0]
    assert done == len(steps)


# Released plan lines whose deploy script names fewer dependencies than the plan (frozen by
# the tag: only a rework could change the script, and a comment is not worth one).
RELEASED_REQUIRES_GAPS = {"configure_producers": {"jobs_admin"}}


def test_every_deploy_script_names_the_dependencies_its_plan_line_has():
    """The `-- requires:` lines of a deploy script say what the plan line says: a reader of
    the script sees what it needs. A reworked change's script may also name what its earlier
    versions required (those stay deployed under it)."""
    import re

    from jobfence.schema_files import plan_steps

    earlier: dict[str, set[str]] = {}  # change -> what its earlier versions required
    problems = []
    for step in plan_steps(REPO):
        wanted = step.requires
        before = earlier.setdefault(step.change, set())
        script = (REPO / "db" / "deploy" / f"{step.script}.sql").read_text()
        named = set(re.findall(r"^-- requires: (\S+)$", script, re.M))
        missing = wanted - named - RELEASED_REQUIRES_GAPS.get(step.script, set())
        extra = named - wanted - before
        before |= wanted
        if missing or extra:
            problems.append(f"{step.script}: the plan also needs {sorted(missing)}, "
                            f"the script also names {sorted(extra)}")
    assert not problems, problems
