"""Hostile input at every door: the public SQL functions (each called as a login role of the
group it is granted to), the CLI and the HTTP API. Whatever comes in — huge or deeply nested
JSON, NUL bytes, invalid Unicode, extreme intervals, ids and timestamps, SQL in names,
mismatched arrays, NULLs — a call either is accepted or is refused with what the docs list:
a SQLSTATE of docs/errors.md, an exit code of docs/cli.md, a status of docs/http.md (read
from those files here, so docs and tests cannot drift). A refused call changes nothing:
a digest of jobs.job and jobs.event is the same before and after it."""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta, timezone
from pathlib import Path

import psycopg
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from api_helpers import start_api
from conftest import REPO
from role_helpers import login_role, url_as

DOCS = REPO / "docs"
# The same examples on every run (a CI failure reproduces locally) within a fixed budget: the
# file stays well under 90 s.
SETTINGS = settings(max_examples=40, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow, HealthCheck.data_too_large])


# -- what the docs promise ------------------------------------------------------------------------
def documented_sqlstates(path: Path = DOCS / "errors.md") -> set[str]:
    """Every SQLSTATE in the first column of a table of docs/errors.md."""
    codes = set()
    for line in path.read_text().splitlines():
        cell = line.split("|")[1].strip() if line.startswith("|") else ""
        codes |= set(re.findall(r"\b([0-9A-Z]{5})\b", cell))
    assert {"JB001", "JB002", "JB003", "JB004", "JB005", "22023"} <= codes, codes
    return codes


def documented_exit_codes(path: Path = DOCS / "cli.md") -> dict[int, str]:
    text = path.read_text()
    table = re.search(r"## Exit codes\n(.*?)\n\n", text, re.S).group(1)
    return {int(m.group(1)): m.group(2).strip()
            for m in re.finditer(r"^\| (\d+) \| ([^|]+)\|", table, re.M)}


def documented_http_statuses(path: Path = DOCS / "http.md") -> set[int]:
    text = path.read_text()
    errors = re.search(r"## Errors\n(.*?)(\n## |\Z)", text, re.S).group(1)
    return {int(s) for s in re.findall(r"^\| (\d{3}) \|", errors, re.M)}


SQLSTATES = documented_sqlstates()
EXIT_CODES = documented_exit_codes()
HTTP_ERRORS = documented_http_statuses()


def test_the_docs_tables_parse():
    assert {0, 2, 3, 4, 5, 6} <= set(EXIT_CODES)
    assert {400, 401, 404, 413, 422} <= HTTP_ERRORS


# -- the state a refused call must leave alone ------------------------------------------------------
def digest(conn: psycopg.Connection) -> tuple:
    return conn.execute("""
        SELECT (SELECT md5(coalesce(string_agg(j::text, '|' ORDER BY j.id), '')) FROM jobs.job AS j),
               (SELECT md5(coalesce(string_agg(e::text, '|' ORDER BY e.id), '')) FROM jobs.event AS e)
    """).fetchone()


@pytest.fixture
def world(declared, conn):
    """One job in each state, and a login role for each group role."""
    ids = {}
    ids["queued"] = conn.execute("SELECT id FROM jobs.submit('noop', '{}', notify => false)").fetchone()[0]
    ids["processing"] = conn.execute("SELECT id FROM jobs.submit('noop', '{}', notify => false)").fetchone()[0]
    conn.execute("SELECT jobs.claim(%s, 'w1')", (ids["processing"],))
    ids["done"] = conn.execute("SELECT id FROM jobs.submit('noop', '{}', notify => false)").fetchone()[0]
    lv = conn.execute("SELECT lease_version FROM jobs.claim(%s, 'w1')", (ids["done"],)).fetchone()[0]
    conn.execute("SELECT jobs.complete(%s, 'w1', %s, NULL)", (ids["done"], lv))
    ids["failed"] = conn.execute("SELECT id FROM jobs.submit('noop', '{}', notify => false)").fetchone()[0]
    conn.execute("SELECT jobs.cancel(%s, 'test')", (ids["failed"],))
    with login_role(declared, "jobs_producer") as producer, \
            login_role(declared, "jobs_worker") as worker, \
            login_role(declared, "jobs_admin") as admin:
        urls = {"producer": url_as(declared, producer), "worker": url_as(declared, worker),
                "admin": url_as(declared, admin)}
        sessions = {role: psycopg.connect(url, autocommit=True) for role, url in urls.items()}
        try:
            yield {"ids": ids, "urls": urls, "conn": sessions, "root": conn}
        finally:
            for s in sessions.values():
                s.close()


def attempt(world, role: str, query: str, params: dict) -> str:
    """Run one call as ``role``; 'ok' or the SQLSTATE of its refusal (checked documented,
    and checked to have changed nothing)."""
    root = world["root"]
    before = digest(root)
    try:
        world["conn"][role].execute(query, params).fetchall()
        return "ok"
    except (UnicodeEncodeError, ValueError, OverflowError) as exc:
        # Refused by the driver before sending (a lone surrogate, a NUL in a text
        # parameter, an out-of-range integer): nothing reached the server.
        outcome = f"unsendable {type(exc).__name__}"
    except psycopg.Error as exc:
        if exc.sqlstate is None:
            assert isinstance(exc, psycopg.DataError), f"{type(exc).__name__}: {exc}"
            outcome = "unsendable"
        else:
            assert exc.sqlstate in SQLSTATES, (
                f"{query} {params!r:.300}\nSQLSTATE {exc.sqlstate} ({type(exc).__name__}: "
                f"{str(exc).strip()[:300]}) is not in docs/errors.md")
            outcome = exc.sqlstate
    assert digest(root) == before, f"a refused call changed something: {query} {params!r:.300}"
    return outcome


# -- hostile values -----------------------------------------------------------------------------
SQL_IN_NAMES = ["x'); DROP TABLE jobs.job; --", "noop' OR '1'='1", "jobs.job", "%s", "$1",
                "noop;", "\\", "\"noop\"", "noop\n", " noop", "NOOP", "ｎｏｏｐ"]
hostile_text = st.one_of(
    st.none(),
    st.sampled_from(SQL_IN_NAMES + ["", " ", "\x00", "a\x00b", "\ud800", "\u202eevil",
                                    "\u200b", "\t", "x" * 5000, "é" * 3000]),
    st.text(max_size=40),
    st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x10FFFF), max_size=20),
)


def nested(depth: int, kind: str = "list") -> str:
    return "[" * depth + "]" * depth if kind == "list" else '{"a":' * depth + "1" + "}" * depth


json_scalars = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70),
                         st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=20))
json_values = st.recursive(json_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=20)
hostile_json_text = st.one_of(
    json_values.map(json.dumps),
    st.sampled_from([nested(65), nested(65, "obj"), nested(3000), nested(20000),
                     json.dumps({"s": "\u0000"}), json.dumps({"s": "x" * 300_000}),
                     json.dumps({"\u0000": 1}), '{"n": 1e400}', json.dumps(list(range(50000))),
                     "null", "[]", '"str"', "{}"]),
)
ids = st.one_of(st.none(), st.sampled_from([0, -1, 1, 2, 3, 4, 2**63 - 1, -2**63]),
                st.integers(-2**63, 2**63 - 1))
intervals = st.one_of(st.none(), st.sampled_from([
    timedelta(0), timedelta(microseconds=1), timedelta(microseconds=-1), timedelta(days=-1),
    timedelta(days=401), timedelta(days=999_999_999), -timedelta(days=999_999_999)]),
    st.timedeltas(min_value=-timedelta(days=10**6), max_value=timedelta(days=10**6)))
timestamps = st.one_of(st.none(), st.sampled_from([
    datetime(1, 1, 1, tzinfo=timezone.utc), datetime(9999, 12, 31, 23, 59, tzinfo=timezone.utc),
    datetime(9999, 12, 30, tzinfo=timezone.utc), datetime(1970, 1, 1, tzinfo=timezone.utc)]),
    st.datetimes(timezones=st.just(timezone.utc)))
small_ints = st.one_of(st.none(), st.sampled_from([0, -1, 1, 2**31 - 1, -2**31]),
                       st.integers(-2**31, 2**31 - 1))
id_arrays = st.one_of(st.none(), st.lists(ids, max_size=6),
                      st.just(list(range(1, 10_002))))
text_arrays = st.one_of(st.none(), st.lists(hostile_text, max_size=6))
bool_arrays = st.one_of(st.none(), st.lists(st.one_of(st.none(), st.booleans()), max_size=6))


# Each public function, the group role it is granted to, its call and its arguments.
CALLS = {
    "submit": ("producer", "SELECT * FROM jobs.submit(%(kind)s, %(payload)s::jsonb, %(key)s, "
               "%(run_after)s, %(ordering)s, false)",
               dict(kind=st.one_of(st.just("noop"), hostile_text), payload=hostile_json_text,
                    key=hostile_text, run_after=timestamps, ordering=hostile_text)),
    "submit_many": ("producer", "SELECT * FROM jobs.submit_many(%(specs)s::jsonb)",
                    dict(specs=st.one_of(hostile_json_text, st.lists(st.fixed_dictionaries(
                        {"kind": st.one_of(st.just("noop"), hostile_text)},
                        optional={"payload": json_values, "run_after": st.text(max_size=30),
                                  "idempotency_key": hostile_text, "notify": json_values,
                                  "ordering_key": hostile_text, "evil": json_values}),
                        max_size=4).map(json.dumps)))),
    "fan_out": ("producer", "SELECT * FROM jobs.fan_out(%(children)s::jsonb, %(then)s::jsonb)",
                dict(children=hostile_json_text, then=hostile_json_text)),
    "cancel": ("producer", "SELECT * FROM jobs.cancel(%(id)s, %(reason)s)",
               dict(id=ids, reason=hostile_text)),
    "get": ("producer", "SELECT * FROM jobs.get(%(id)s)", dict(id=ids)),
    "events": ("producer", "SELECT * FROM jobs.events(%(id)s)", dict(id=ids)),
    "children": ("producer", "SELECT * FROM jobs.children(%(id)s)", dict(id=ids)),
    "list_jobs": ("producer", "SELECT * FROM jobs.list_jobs(kind => %(kind)s, before_id => "
                  "%(before)s, max_jobs => %(n)s)",
                  dict(kind=hostile_text, before=ids, n=small_ints)),
    "mark_enqueue_failed": ("producer", "SELECT * FROM jobs.mark_enqueue_failed(%(ids)s::bigint[])",
                            dict(ids=id_arrays)),
    "claim": ("worker", "SELECT * FROM jobs.claim(%(id)s, %(worker)s)",
              dict(id=ids, worker=hostile_text)),
    "claim_many": ("worker", "SELECT * FROM jobs.claim_many(%(ids)s::bigint[], %(worker)s)",
                   dict(ids=id_arrays, worker=hostile_text)),
    "claim_next": ("worker", "SELECT * FROM jobs.claim_next(%(worker)s, %(queues)s::text[], %(n)s)",
                   dict(worker=hostile_text, queues=text_arrays, n=small_ints)),
    "heartbeat": ("worker", "SELECT * FROM jobs.heartbeat(%(id)s, %(worker)s, %(lv)s)",
                  dict(id=ids, worker=hostile_text, lv=ids)),
    "heartbeat_many": ("worker", "SELECT * FROM jobs.heartbeat_many(%(ids)s::bigint[], %(worker)s, "
                       "%(lvs)s::bigint[])", dict(ids=id_arrays, worker=hostile_text, lvs=id_arrays)),
    "complete": ("worker", "SELECT * FROM jobs.complete(%(id)s, %(worker)s, %(lv)s, %(result)s::jsonb)",
                 dict(id=ids, worker=hostile_text, lv=ids, result=st.one_of(st.none(), hostile_json_text))),
    "complete_many": ("worker", "SELECT * FROM jobs.complete_many(%(ids)s::bigint[], %(worker)s, "
                      "%(lvs)s::bigint[], %(results)s::jsonb[])",
                      dict(ids=id_arrays, worker=hostile_text, lvs=id_arrays,
                           results=st.one_of(st.none(), st.lists(st.one_of(st.none(), hostile_json_text),
                                                                 max_size=4)))),
    "fail": ("worker", "SELECT * FROM jobs.fail(%(id)s, %(worker)s, %(lv)s, %(error)s, %(retry)s)",
             dict(id=ids, worker=hostile_text, lv=ids, error=hostile_text,
                  retry=st.one_of(st.none(), st.booleans()))),
    "fail_many": ("worker", "SELECT * FROM jobs.fail_many(%(ids)s::bigint[], %(worker)s, "
                  "%(lvs)s::bigint[], %(errors)s::text[], %(retry)s::boolean[])",
                  dict(ids=id_arrays, worker=hostile_text, lvs=id_arrays, errors=text_arrays,
                       retry=bool_arrays)),
    "replay": ("admin", "SELECT * FROM jobs.replay(%(id)s)", dict(id=ids)),
    "define_type": ("admin", "SELECT * FROM jobs.define_type(%(kind)s, queue => %(queue)s, "
                    "lease_timeout => %(lease)s, timeout => %(timeout)s, max_retries => %(retries)s, "
                    "max_payload_bytes => %(bytes)s)",
                    dict(kind=hostile_text, queue=hostile_text, lease=intervals, timeout=intervals,
                         retries=small_ints, bytes=small_ints)),
    "metrics": ("admin", "SELECT * FROM jobs.metrics(%(since)s)", dict(since=intervals)),
    "stale_queued": ("admin", "SELECT * FROM jobs.stale_queued(%(queue)s, %(age)s, %(n)s)",
                     dict(queue=hostile_text, age=intervals, n=small_ints)),
    "dead_letters": ("admin", "SELECT * FROM jobs.dead_letters(%(ids)s::bigint[])", dict(ids=id_arrays)),
    "reap": ("admin", "SELECT * FROM jobs.reap(%(n)s)", dict(n=st.one_of(st.none(), st.sampled_from([0, -1, -2**31])))),
    "recover_enqueue_failed": ("admin", "SELECT * FROM jobs.recover_enqueue_failed(%(n)s)",
                               dict(n=st.one_of(st.none(), st.sampled_from([0, -1, -2**31])))),
    "compact_metrics": ("admin", "SELECT * FROM jobs.compact_metrics(%(n)s)",
                        dict(n=st.one_of(st.none(), st.sampled_from([0, -1, -2**31])))),
    "audit": ("admin", "SELECT * FROM jobs.audit(%(every)s, %(n)s)", dict(every=intervals, n=small_ints)),
    "prune": ("admin", "SELECT * FROM jobs.prune(%(age)s)",
              # Only refusals: an accepted prune deletes what it should, which is no test here.
              dict(age=st.one_of(st.none(), st.sampled_from([timedelta(0), timedelta(days=-1),
                                                             -timedelta(days=999_999_999)])))),
}


@pytest.mark.parametrize("name", sorted(CALLS))
def test_sql_function_refuses_hostile_input_with_a_documented_sqlstate(name, world):
    role, query, strategies = CALLS[name]

    # JSON arrives as text and is cast by the query: the server's parser meets it as sent.
    @SETTINGS
    @given(st.fixed_dictionaries(strategies))
    def check(drawn):
        attempt(world, role, query, drawn)

    check()


# Inputs the contract says must be refused, each with its code (docs/errors.md, docs/sql-api.md).
MUST_REFUSE = [
    ("nesting 65 deep", "producer", "SELECT jobs.submit('noop', %(p)s::jsonb)", {"p": nested(65, "obj")}, {"JB004"}),
    ("nesting 20000 deep", "producer", "SELECT jobs.submit('noop', %(p)s::jsonb)", {"p": nested(20000)}, {"JB004", "54001"}),
    ("payload over 256 KiB", "producer", "SELECT jobs.submit('noop', %(p)s::jsonb)",
     {"p": json.dumps({"s": "x" * 300_000})}, {"JB004"}),
    ("a payload number beyond the double range", "producer", "SELECT jobs.submit('noop', %(p)s::jsonb)",
     {"p": '{"x": 1e5000}'}, {"22003"}),
    ("a result number beyond the double range", "worker", "SELECT * FROM jobs.complete(%(id)s, 'w1', 1, %(r)s::jsonb)",
     {"id": "processing", "r": "[-1e400]"}, {"22003"}),
    ("NUL in a payload", "producer", "SELECT jobs.submit('noop', %(p)s::jsonb)", {"p": '{"s": "\\u0000"}'}, {"22P05"}),
    ("invalid UTF-8 in a kind", "producer", "SELECT jobs.submit(convert_from('\\xff'::bytea, 'UTF8'), '{}')", {}, {"22021"}),
    ("SQL in a kind", "producer", "SELECT jobs.submit(%(k)s, '{}')", {"k": SQL_IN_NAMES[0]}, {"22023", "JB005"}),
    ("NULL kind", "producer", "SELECT jobs.submit(NULL, '{}')", {}, {"22023"}),
    ("run_after in year 9999", "producer", "SELECT jobs.submit('noop', '{}', run_after => %(t)s)",
     {"t": datetime(9999, 12, 31, tzinfo=timezone.utc)}, {"22023"}),
    ("run_after string beyond the range", "producer", "SELECT jobs.submit_many(%(s)s::jsonb)",
     {"s": json.dumps([{"kind": "noop", "run_after": "10000-01-01T00:00:00Z"}])}, {"22023"}),
    ("10,001 specs", "producer", "SELECT jobs.submit_many(%(s)s::jsonb)",
     {"s": json.dumps([{"kind": "noop"}] * 10_001)}, {"22023"}),
    ("cancel reason over 4096 bytes", "producer", "SELECT jobs.cancel(%(id)s, %(r)s)",
     {"id": "queued", "r": "r" * 4097}, {"22023"}),
    ("worker id with a bidi override", "worker", "SELECT * FROM jobs.claim(%(id)s, %(w)s)",
     {"id": "queued", "w": "\u202eevil"}, {"22023"}),
    ("worker id with a control character", "worker", "SELECT * FROM jobs.claim(%(id)s, %(w)s)",
     {"id": "queued", "w": "w\x07"}, {"22023"}),
    ("worker id surrounded by spaces", "worker", "SELECT * FROM jobs.claim(%(id)s, %(w)s)",
     {"id": "queued", "w": " w1 "}, {"22023"}),
    ("empty worker id", "worker", "SELECT * FROM jobs.claim(%(id)s, '')", {"id": "queued"}, {"22023"}),
    ("result over 1 MiB", "worker", "SELECT * FROM jobs.complete(%(id)s, 'w1', 1, %(r)s::jsonb)",
     {"id": "processing", "r": json.dumps({"s": "x" * (1 << 20)})}, {"22023"}),
    ("error over 64 KiB", "worker", "SELECT * FROM jobs.fail(%(id)s, 'w1', 1, %(e)s, true)",
     {"id": "processing", "e": "e" * 65_537}, {"22023"}),
    ("mismatched arrays", "worker", "SELECT * FROM jobs.complete_many(%(ids)s, 'w1', %(lvs)s, %(rs)s::jsonb[])",
     {"ids": ["processing"], "lvs": [1, 1], "rs": [None]}, {"22023"}),
    ("NULL arrays", "worker", "SELECT * FROM jobs.fail_many(NULL, 'w1', NULL, NULL, NULL)", {}, {"22023"}),
    ("another worker's lease", "worker", "SELECT * FROM jobs.complete(%(id)s, 'w2', 1, NULL)",
     {"id": "processing"}, {"JB001"}),
    ("a negative metrics window", "admin", "SELECT * FROM jobs.metrics(%(d)s)", {"d": timedelta(days=-1)}, {"22023"}),
    ("an extreme metrics window", "admin", "SELECT * FROM jobs.metrics(%(d)s)",
     {"d": timedelta(days=999_999_999)}, {"22023"}),
    ("a negative prune age", "admin", "SELECT * FROM jobs.prune(%(d)s)", {"d": timedelta(days=-1)}, {"22023"}),
    ("replay of an unknown id", "admin", "SELECT jobs.replay(%(id)s)", {"id": 2**63 - 1}, {"JB002"}),
    ("replay of a queued job", "admin", "SELECT jobs.replay(%(id)s)", {"id": "queued"}, {"JB003"}),
    ("SQL in a kind to declare", "admin", "SELECT jobs.define_type(%(k)s)", {"k": SQL_IN_NAMES[0]}, {"22023"}),
]


@pytest.mark.parametrize("what, role, query, params, codes", MUST_REFUSE, ids=[m[0] for m in MUST_REFUSE])
def test_sql_refuses_what_the_contract_refuses(what, role, query, params, codes, world):
    def resolve(v):
        if isinstance(v, list):
            return [resolve(x) for x in v]
        return world["ids"].get(v, v) if isinstance(v, str) else v
    params = {k: (resolve(v) if k in ("id", "ids") else v) for k, v in params.items()}
    outcome = attempt(world, role, query, params)
    assert outcome in codes, f"{what}: {outcome}, want one of {sorted(codes)}"


# -- the CLI ------------------------------------------------------------------------------------
cli_ids = st.one_of(st.sampled_from(["-1", "0", "1e3", "0x10", "١", "9" * 30, "1; DROP TABLE jobs.job",
                                     "' OR 1=1 --", "", " 1", "--help=1", "\x00"]),
                    st.text(max_size=12), st.integers(-2**70, 2**70).map(str))


@pytest.fixture
def cli(world, redis_url):
    from jobfence.cli import main

    runner = CliRunner()

    def run(role: str, *args: str):
        before = digest(world["root"])
        result = runner.invoke(main, ["--database-url", world["urls"][role], "--redis-url",
                                      redis_url, *args], catch_exceptions=True)
        code = result.exit_code
        crashed = result.exception is not None and not isinstance(result.exception, SystemExit)
        assert not crashed, f"jobfence {args!r:.200}: {result.exception!r}\n{result.output[-500:]}"
        assert code in EXIT_CODES, f"exit {code} is not in docs/cli.md"
        assert code != 1, f"jobfence {args!r:.200}: unexpected error (exit 1): {result.output[-500:]}"
        assert "Traceback" not in result.output
        if code != 0:
            assert digest(world["root"]) == before, f"jobfence {args!r:.200} exit {code} changed something"
        return code

    return run


@SETTINGS
@given(kind=st.one_of(st.just("noop"), hostile_text.filter(lambda t: t is not None)),
       payload=hostile_json_text, extra=st.sampled_from([[], ["--run-after", "1e308"],
                                                        ["--run-after", "-5"], ["--run-after", "nan"],
                                                        ["--run-after", "10000-01-01T00:00:00Z"],
                                                        ["--idempotency-key", "\x00"],
                                                        ["--ordering-key", ""]]))
def test_cli_submit_refuses_hostile_input_with_a_documented_exit_code(cli, kind, payload, extra):
    cli("producer", "submit", kind, "--payload", payload, *extra)


@SETTINGS
@given(command=st.sampled_from(["status", "cancel", "replay"]), job=cli_ids,
       reason=st.one_of(st.none(), hostile_text.filter(lambda t: t is not None)))
def test_cli_status_cancel_replay_refuse_hostile_ids(cli, command, job, reason):
    role = "admin" if command == "replay" else "producer"
    args = [command, job]
    if command == "cancel" and reason is not None:
        args += ["--reason", reason]
    cli(role, *args)


# -- the HTTP API ---------------------------------------------------------------------------------
@pytest.fixture
def api(world, procs):
    # As shipped: producer-scoped requests as a jobs_producer login, admin-scoped ones as a
    # jobs_admin login (docs/http.md, "Database logins").
    return start_api(procs, env={"JOBFENCE_DATABASE_URL": world["urls"]["producer"],
                                 "JOBFENCE_API_ADMIN_DATABASE_URL": world["urls"]["admin"]})


def _http(world, api, method: str, path: str, raw: bytes | None = None, headers=None) -> int:
    before = digest(world["root"])
    answer = api.call(method, path, raw=raw, headers=headers or (
        {"Content-Type": "application/json"} if raw is not None else {}))
    status = answer.status
    assert status in HTTP_ERRORS | {200, 202}, (
        f"{method} {path[:200]} -> {status} is not in docs/http.md: {answer.raw[:300]!r}")
    if status >= 400:
        assert digest(world["root"]) == before, f"{method} {path[:100]} -> {status} changed something"
    return status


raw_bodies = st.one_of(
    hostile_json_text.map(lambda t: t.encode("utf-8", "surrogatepass")),
    st.fixed_dictionaries({"kind": st.one_of(st.just("noop"), hostile_text)},
                          optional={"payload": json_values, "run_after": json_values,
                                    "idempotency_key": json_values, "ordering_key": json_values,
                                    "evil": json_values}).map(
        lambda d: json.dumps(d).encode()),
    st.sampled_from([b"\xff\xfe", b'{"kind": "noop", "payload": {"s": "\xff"}}', b"",
                     b'{"kind": "noop", "payload": ' + nested(3000).encode() + b"}",
                     b'{"kind": "noop", "payload": {"s": "\\u0000"}}',
                     b'{"kind": "noop", "payload": {"n": NaN}}',
                     b'{"kind": "noop", "run_after": "9999-12-31T00:00:00Z"}',
                     b'{"kind": "noop", "run_after": 1e308}',
                     b'{"kind": "noop", "payload": {"s": "' + b"x" * 300_000 + b'"}}']),
)


@SETTINGS
@given(body=raw_bodies, route=st.sampled_from(["/jobs", "/jobs/batch", "/jobs/fan-out"]))
def test_api_refuses_hostile_bodies_with_a_documented_status(world, api, body, route):
    if route == "/jobs/batch":
        body = b'{"jobs": [' + body + b"]}"
    elif route == "/jobs/fan-out":
        body = b'{"children": [' + body + b'], "then": {"kind": "noop"}}'
    _http(world, api, "POST", route, raw=body)


@SETTINGS
@given(job=cli_ids, suffix=st.sampled_from(["", "/events", "/children", "/cancel", "/replay"]),
       query=st.sampled_from(["", "?wait=-1", "?wait=1e308", "?wait=nan", "?limit=0", "?x=%00",
                              "?kind=%27%3B%20DROP%20TABLE%20jobs.job", "?status=evil"]))
def test_api_refuses_hostile_paths_with_a_documented_status(world, api, job, suffix, query):
    from urllib.parse import quote

    method = "POST" if suffix in ("/cancel", "/replay") else "GET"
    _http(world, api, method, f"/jobs/{quote(job, safe='')}{suffix}{query}",
          raw=b"{}" if method == "POST" else None)
