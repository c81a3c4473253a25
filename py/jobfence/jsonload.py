"""Reading ``json``/``jsonb`` columns so that one stored value cannot break its readers.

PostgreSQL's ``jsonb`` holds what Python's ``json`` refuses: ``1e5000`` is stored and printed
as 5,001 digits, beyond Python's 4,300-digit limit for integers, and a superuser may write a
value nested too deeply to parse. The SQL functions refuse such numbers now (22003), but
rows written before that, or past the functions, must not make a batch of leases, a listing
or a ``status`` fail: every connection of the drivers decodes through ``loads``, which hands
back what it cannot decode as ``UndecodedJson``, the JSON text itself.
"""

from __future__ import annotations

import json
from typing import Any

from psycopg.types.json import set_json_loads


class UndecodedJson(str):
    """The JSON text of a value Python's ``json`` could not decode; ``reason`` says why.
    Shown as text by the API, the dashboard and the CLI; the worker fails such a job at
    once, without retry (no attempt would read it better)."""

    reason: str

    def __new__(cls, text: str, reason: str = "") -> "UndecodedJson":
        self = super().__new__(cls, text)
        self.reason = reason
        return self

    def __reduce__(self):
        # A job's lease may be handed to a handler process.
        return (UndecodedJson, (str(self), self.reason))


def _reason(exc: BaseException) -> str:
    if isinstance(exc, RecursionError):
        return "nested too deeply for Python's JSON parser"
    # "...: value has 5001 digits; use sys.set_int_max_str_digits() to increase the limit":
    # the advice is for whoever runs Python, not for the job's reader.
    return str(exc).split("; use sys.", 1)[0]


# json.loads of bytes first guesses their encoding, then wraps the C scanner in two
# regular-expression passes for the whitespace around the value: 1.9 us for "{}", where the
# scanner alone takes 0.2. PostgreSQL hands over UTF-8, and jsonb prints no whitespace
# around a value: the scanner is tried first, and anything it does not read whole (a json
# column's surrounding whitespace, an error) goes through json.loads as before.
_scan_once = json.JSONDecoder().scan_once


def loads(data: bytes | str) -> Any:
    """``json.loads``, or ``UndecodedJson`` for a value it refuses."""
    try:
        text = data.decode("utf-8") if isinstance(data, (bytes, bytearray)) else data
        value, end = _scan_once(text, 0)
        if end == len(text):
            return value
    except (StopIteration, ValueError, RecursionError, AttributeError, TypeError):
        pass  # read again below, which says what is wrong
    try:
        return json.loads(data)
    except (ValueError, RecursionError) as exc:
        text = data.decode("utf-8", "replace") if isinstance(data, (bytes, bytearray)) else str(data)
        return UndecodedJson(text, _reason(exc))


def tolerate(conn) -> None:
    """Register ``loads`` for ``json`` and ``jsonb`` on one connection (sync or async): the
    pools' ``configure`` hook, and any connection the drivers open themselves."""
    set_json_loads(loads, conn)


async def tolerate_async(conn) -> None:
    tolerate(conn)
