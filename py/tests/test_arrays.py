"""The hot calls' arrays are dumped whole (jobfence.arrays): what the server reads from them is
what it reads from psycopg's own dump of the same list, on a pool's connection as the drivers
configure it, and a batch of results is stored as the handlers returned them."""

from __future__ import annotations

import uuid

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jobfence import arrays
from jobfence.arrays import BigintArray, JsonbArray, UuidArray
from jobfence.db import Database
from jobfence.worker.common import encode_result

SETTINGS = settings(max_examples=60, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])

# What jsonb stores: no NUL in text, numbers within a double's range (the functions refuse
# others), every other character.
texts = st.text(st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00"))
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False, width=32) | texts,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts, inner, max_size=4),
    max_leaves=12)


@pytest.fixture(scope="module")
def pooled(database_url):
    """A connection of a drivers' pool: the arrays registered by its configure hook."""
    db = Database(database_url, max_size=1, open_timeout=10)
    try:
        with db.connection() as conn:
            yield conn
    finally:
        db.close()


def _both(conn: psycopg.Connection, sql_type: str, packed: list, plain: list):
    """What the server reads from a wrapper, and from psycopg's own dump of the plain list."""
    got = conn.execute(f"SELECT %b::{sql_type}[]", (packed,)).fetchone()[0]
    psycopgs = conn.execute(f"SELECT %b::{sql_type}[]", (plain,)).fetchone()[0]
    return got, psycopgs


@SETTINGS
@given(ids=st.lists(st.integers(-(2**63), 2**63 - 1) | st.booleans(), max_size=50))
def test_bigint_arrays_read_as_psycopg_dumps_them(pooled, ids):
    got, psycopgs = _both(pooled, "bigint", BigintArray(ids), [int(i) for i in ids])
    assert got == psycopgs == [int(i) for i in ids]


@SETTINGS
@given(tokens=st.lists(st.none() | st.uuids(), max_size=50), as_text=st.booleans())
def test_uuid_arrays_read_as_psycopg_dumps_them(pooled, tokens, as_text):
    given_tokens = [t if t is None or not as_text else str(t) for t in tokens]
    got, psycopgs = _both(pooled, "uuid", UuidArray(given_tokens), tokens)
    assert got == psycopgs == tokens


@SETTINGS
@given(values=st.lists(st.none() | json_values.map(lambda v: ("value", v)), max_size=20))
def test_jsonb_arrays_read_as_psycopg_dumps_them(pooled, values):
    # ("value", v): an element that is a JSON null (v None) is not an SQL NULL (the item None).
    wrapped = [None if item is None
               else encode_result(item[1])[1] if item[1] is not None else psycopg.types.json.Jsonb(None)
               for item in values]
    got, psycopgs = _both(pooled, "jsonb", JsonbArray(wrapped), wrapped)
    assert got == psycopgs


def test_hostile_json_text_and_a_wrapper_of_its_own_read_back_whole(pooled):
    nasty = {'quo"te': 'back\\slash', "braces": "{,}", "lines": "a\nb\tc", "null": "NULL",
             "unicode": "é ü 😀", "escape": "\\u0041 \\\"", "empty": ""}
    wrapped = [encode_result(nasty)[1], None, psycopg.types.json.Jsonb(["raw", 1]),
               psycopg.types.json.Jsonb(None)]
    got = pooled.execute("SELECT %b::jsonb[]", (JsonbArray(wrapped),)).fetchone()[0]
    assert got == [nasty, None, ["raw", 1], None]
    # The JSON null is a jsonb value, the None an SQL NULL.
    nulls = pooled.execute("SELECT array_agg(e IS NULL ORDER BY o) FROM unnest(%b::jsonb[]) "
                           "WITH ORDINALITY AS u(e, o)", (JsonbArray(wrapped),)).fetchone()[0]
    assert nulls == [False, True, False, False]
    # Through a connection in another encoding, the text is sent in that encoding.
    with psycopg.connect(pooled.info.dsn, autocommit=True, options="-c client_encoding=LATIN1") as latin:
        arrays.register(latin)
        assert latin.execute("SELECT (%b::jsonb[])[1] ->> 'c'",
                             (JsonbArray([psycopg.types.json.Jsonb({"c": "é"})]),)).fetchone()[0] == "é"


def test_a_connection_without_them_sends_the_lists_as_psycopg_would(database_url):
    with psycopg.connect(database_url, autocommit=True) as plain:
        row = plain.execute("SELECT %b::bigint[], %b::uuid[]",
                            (BigintArray([1, 2]), UuidArray([uuid.UUID(int=7)]))).fetchone()
    assert row == ([1, 2], [uuid.UUID(int=7)])


def test_what_is_not_an_id_or_a_token_is_refused_before_anything_is_sent(pooled):
    for bad in (["5"], [1.0], [None], [2**63]):
        with pytest.raises(TypeError, match="64-bit integers"):
            pooled.execute("SELECT %b::bigint[]", (BigintArray(bad),))
    with pytest.raises(ValueError):
        pooled.execute("SELECT %b::uuid[]", (UuidArray(["not a token"]),))
    assert pooled.execute("SELECT %b::bigint[], %b::uuid[], %b::jsonb[]",
                          (BigintArray([]), UuidArray([]), JsonbArray([]))).fetchone() == ([], [], [])


def test_a_batch_of_results_is_stored_as_the_handlers_returned_them(declared, client):
    from jobfence.worker.leasedb import LeaseDatabase

    ids = client.submit_many([{"kind": "noop"}] * 4)
    results = [{"say": 'he said "hi" \\ {ok}'}, None, ["a", {"b": None}], "NULL"]
    db = LeaseDatabase(declared, max_size=1, open_timeout=10)
    try:
        leases = sorted(db.claim_leases(ids, "w-results"), key=lambda lease: lease.job_id)
        assert [lease.job_id for lease in leases] == sorted(ids)
        items = [(lease, encode_result(result)[1]) for lease, result in zip(leases, results)]
        assert db.complete_leases(items, "w-results") == {}
        with db.connection() as conn:
            stored = conn.execute("SELECT result FROM jobs.job WHERE id = ANY (%s) ORDER BY id",
                                  (sorted(ids),)).fetchall()
        assert [r[0] for r in stored] == results
    finally:
        db.close()
