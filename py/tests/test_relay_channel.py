"""The jobs_submitted channel is open to every role that may connect (PostgreSQL has no
privilege for NOTIFY): a hostile or broken sender must neither stop the relay nor make it
push anything that PostgreSQL does not say waits for a signal, nor write any Redis key of
its choosing. Real PostgreSQL, real Redis, a real `jobfence relay` process."""

from __future__ import annotations

import json

import psycopg
import pytest
import redis as redis_lib

from conftest import wait_until
from jobfence.relay import MAX_IDS_PER_NOTIFICATION, BadNotification, parse_notification
from role_helpers import login_role, url_as

GARBAGE = [
    "[1]",
    "1",
    "null",
    '"jobs"',
    "",
    "not json at all",
    "{",
    "[" * 7000,                                   # nesting that recurses past Python's limit
    '{"queue": "evil", "ids": "1"}',
    '{"queue": "evil", "ids": []}',
    '{"queue": "evil", "ids": [true]}',
    '{"queue": "evil", "ids": [1.5]}',
    '{"queue": "evil", "ids": [-1, 0]}',
    '{"queue": "evil", "ids": [9223372036854775808]}',
    '{"queue": ["q"], "ids": [900001]}',
    '{"queue": "", "ids": [900001]}',
    '{"queue": "q", "ids": [1], "extra": 1}',
    '{"id": 1}',
    '{"id": "1", "queue": "q", "run_after": null}',
    '{"id": 1, "queue": "q", "run_after": "yesterday"}',
    '{"id": 1, "queue": "q", "run_after": 12}',
    json.dumps({"queue": "q", "ids": list(range(1, MAX_IDS_PER_NOTIFICATION + 2))}),
    json.dumps({"queue": "q", "ids": [1] * 2600})[:7999],  # cut: not JSON
    "x" * 7999,                                   # PostgreSQL refuses 8000 bytes and more
]
# Well-formed, so refused only by PostgreSQL's answer: ids that wait for no signal.
FORGED = [
    '{"queue": "evil", "ids": [900001]}',
    '{"queue": "\\ud800", "ids": [900002]}',           # a lone surrogate as the queue
    '{"id": 900003, "queue": "jobfence:{default}:ready", "run_after": null}',
]


@pytest.mark.parametrize("payload", GARBAGE, ids=range(len(GARBAGE)))
def test_the_parser_refuses_what_no_producer_sends(payload):
    with pytest.raises(BadNotification):
        parse_notification(payload)


def test_the_parser_refuses_payloads_over_the_bound():
    with pytest.raises(BadNotification):
        parse_notification(json.dumps({"queue": "q", "ids": [1]}) + " " * 8000)


def test_the_parser_takes_what_the_producers_send(conn, declared):
    listener = psycopg.connect(declared, autocommit=True)
    try:
        listener.execute("LISTEN jobs_submitted")
        conn.execute("SELECT jobs.submit('noop', '{}'::jsonb)")
        conn.execute("""SELECT jobs.submit_many('[{"kind":"noop"},{"kind":"noop"}]'::jsonb)""")
        conn.execute("""SELECT jobs.submit_many(jsonb_build_array(
            jsonb_build_object('kind', 'noop', 'run_after', now() + interval '1 hour'),
            jsonb_build_object('kind', 'noop', 'run_after', now() + interval '1 hour')))""")
        notes = list(listener.notifies(timeout=2, stop_after=3))
    finally:
        listener.close()
    assert [len(parse_notification(n.payload)) for n in notes] == [1, 2, 2]
    assert parse_notification(notes[2].payload)[0][2] is not None


@pytest.fixture
def nobody(clean_db):
    """The URL of a login role with no grant at all: all it has is CONNECT (PUBLIC's)."""
    with login_role(clean_db) as name:
        yield url_as(clean_db, name)


def _keys(r: redis_lib.Redis) -> set[bytes]:
    return set(r.scan_iter(count=1000))


def test_garbage_from_a_role_with_no_grants_pushes_nothing_and_the_relay_survives(
        procs, declared, nobody, conn):
    r = redis_lib.Redis.from_url(procs.redis_url)
    relay = procs.start("relay", "relay", "--poll-interval", "0.5", "--stale-after", "60")
    relay.wait_for("relay_listening")
    # A job that waits for a signal, announced by nobody: a forged notification naming it
    # and a hostile queue must push it to its own queue only.
    waiting = conn.execute("SELECT id FROM jobs.submit('noop', '{}'::jsonb, notify => false)"
                           ).fetchone()[0]
    done = conn.execute("SELECT id FROM jobs.submit('noop', '{}'::jsonb, notify => false)"
                        ).fetchone()[0]
    lease = conn.execute("SELECT lease_version FROM jobs.claim(%s, 'w')", (done,)).fetchone()[0]
    conn.execute("SELECT jobs.complete(%s, 'w', %s, NULL)", (done, lease))
    assert _keys(r) == set(), "the test starts from an empty Redis"

    with psycopg.connect(nobody, autocommit=True) as attacker:
        assert attacker.execute("SELECT has_schema_privilege('jobs', 'USAGE')"
                                ).fetchone()[0] is False
        for payload in GARBAGE + FORGED + [
                json.dumps({"id": done, "queue": "evil", "run_after": None}),
                json.dumps({"queue": "evil", "ids": [done, 424242]}),
                json.dumps({"queue": "evil", "ids": [waiting],
                            "run_after": "2999-01-01T00:00:00+00:00"})]:
            attacker.execute("SELECT pg_notify('jobs_submitted', %s)", (payload,))
        # Notifications arrive in commit order: once this one is pushed, every forged one
        # before it has been read.
        marker = conn.execute("SELECT id FROM jobs.submit('noop', '{}'::jsonb)").fetchone()[0]

    ready = b"jobfence:{default}:ready"
    wait_until(lambda: str(marker).encode() in r.lrange(ready, 0, -1), 15,
               what=f"the real submit to be pushed\n{relay.tail()}")
    assert relay.alive(), relay.tail()
    assert sorted(int(i) for i in r.lrange(ready, 0, -1)) == sorted([waiting, marker])
    assert _keys(r) == {ready}, "a forged notification wrote a key of its choosing"
    assert relay.find("bad_notification"), relay.tail()
    skipped = relay.find("notification_ids_skipped")
    assert skipped and skipped[0]["count"] >= 1
    assert not relay.find("relay_stopped")

    # Still relaying after all that.
    again = conn.execute("SELECT id FROM jobs.submit('noop', '{}'::jsonb)").fetchone()[0]
    wait_until(lambda: str(again).encode() in r.lrange(ready, 0, -1), 15,
               what=f"a later submit to be pushed\n{relay.tail()}")
    assert relay.alive()
    r.close()


def test_forged_warnings_are_throttled(procs, declared, nobody, conn):
    """A flood of forged messages writes a line a minute, not a line each."""
    r = redis_lib.Redis.from_url(procs.redis_url)
    relay = procs.start("relay", "relay", "--poll-interval", "0.5", "--stale-after", "60")
    relay.wait_for("relay_listening")
    with psycopg.connect(nobody, autocommit=True) as attacker:
        for _ in range(200):
            attacker.execute("NOTIFY jobs_submitted, '[1]'")
            attacker.execute("""NOTIFY jobs_submitted, '{"queue": "evil", "ids": [99999]}'""")
    marker = conn.execute("SELECT id FROM jobs.submit('noop', '{}'::jsonb)").fetchone()[0]
    wait_until(lambda: str(marker).encode() in r.lrange(b"jobfence:{default}:ready", 0, -1), 15,
               what=f"the real submit to be pushed\n{relay.tail()}")
    assert len(relay.find("bad_notification")) == 1
    assert len(relay.find("notification_ids_skipped")) == 1
    assert relay.alive()
    r.close()


def test_a_role_with_no_grants_cannot_read_jobs_but_postgres_lets_it_listen(nobody, declared,
                                                                             conn):
    """What REVOKE CONNECT is for (docs/security.md): LISTEN needs no privilege, so the ids
    a producer announces reach any connected role; nothing else of a job does."""
    with psycopg.connect(nobody, autocommit=True) as spy:
        spy.execute("LISTEN jobs_submitted")
        job = conn.execute("SELECT id FROM jobs.submit('noop', '{\"secret\": 1}'::jsonb)"
                           ).fetchone()[0]
        notes = list(spy.notifies(timeout=2, stop_after=1))
        assert [parse_notification(n.payload)[0][0] for n in notes] == [job]
        assert "secret" not in notes[0].payload
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            spy.execute("SELECT * FROM jobs.get(%s)", (job,))
