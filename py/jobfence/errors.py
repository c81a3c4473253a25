"""Exceptions raised by the drivers, mapped from the SQLSTATE codes of docs/errors.md.

The SQL functions are the authority on what is legal; this module only gives their errors a
Python type so callers can ``except LeaseLost`` instead of comparing strings. A test keeps
``REGISTRY`` and the table in docs/errors.md identical.
"""

from __future__ import annotations

import psycopg

from . import redact


class JobfenceError(Exception):
    """Base of every error raised by jobfence."""

    sqlstate: str | None = None
    name: str = "jobfence_error"

    def __init__(self, message: str, *, hint: str | None = None, sqlstate: str | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint
        if sqlstate is not None:
            self.sqlstate = sqlstate

    def __str__(self) -> str:
        return f"{self.message} (HINT: {self.hint})" if self.hint else self.message


class DatabaseError(JobfenceError):
    """A PostgreSQL error with a SQLSTATE that is not in the registry."""

    name = "database_error"


class LeaseLost(JobfenceError):
    """The authority predicate failed: the lease is stale, reaped or reassigned."""

    sqlstate = "JB001"
    name = "lease_lost"


class JobNotFound(JobfenceError):
    sqlstate = "JB002"
    name = "job_not_found"


class IllegalTransition(JobfenceError):
    sqlstate = "JB003"
    name = "illegal_transition"


class PayloadTooLarge(JobfenceError):
    sqlstate = "JB004"
    name = "payload_too_large"


class UnknownKind(JobfenceError):
    sqlstate = "JB005"
    name = "unknown_kind"


class InvalidParameter(JobfenceError):
    sqlstate = "22023"
    name = "invalid_parameter_value"


class NumberOutOfRange(InvalidParameter):
    """A payload, result or progress holding a number beyond the IEEE-754 double range: bad
    input like any other, so ``except InvalidParameter`` catches it too."""

    sqlstate = "22003"
    name = "numeric_value_out_of_range"


class IdempotencyKeyReused(JobfenceError):
    """A repeated idempotency key whose request differs from the job that holds the key
    (jobs.repeat_differences). Raised only by callers that ask for the check (the HTTP API,
    422); nothing was written."""

    name = "idempotency_key_reused"

    def __init__(self, differences: list[dict]):
        first = differences[0]
        super().__init__(
            f"Idempotency-Key {first['idempotency_key']!r} is already used by job "
            f"{first['job_id']}, submitted with a different {', '.join(first['differs'])}",
            hint="Repeat the original request unchanged to get that job, or send a new key "
                 "for a new job.")
        self.differences = differences


REGISTRY: dict[str, type[JobfenceError]] = {
    cls.sqlstate: cls
    for cls in (LeaseLost, JobNotFound, IllegalTransition, PayloadTooLarge, UnknownKind,
                InvalidParameter, NumberOutOfRange)
}


class NonRetryable(Exception):
    """Raise from a handler for a permanent error: the job fails at once, no retry."""


class Cancelled(Exception):
    """Raised by ``Context.raise_if_cancelled`` once the job was cancelled or timed out."""


class Snooze(Exception):
    """Raise from a handler for "not now": the job goes back to ``queued`` and runs again
    after ``seconds`` (0 to 30 days), without spending its retry budget (``jobs.snooze``).
    A job may snooze ``jobs.max_snoozes()`` times; the next snooze fails it."""

    def __init__(self, seconds: float):
        seconds = float(seconds)
        if not 0 <= seconds <= MAX_SNOOZE_SECONDS:
            raise ValueError(f"Snooze({seconds!r}): the delay must be 0 to {MAX_SNOOZE_SECONDS} seconds (30 days)")
        super().__init__(f"snoozed for {seconds:g}s")
        self.seconds = seconds


# jobs.snooze's bound: a later time is a new job with run_after.
MAX_SNOOZE_SECONDS = 30 * 86400


def translate(exc: psycopg.Error) -> JobfenceError | psycopg.Error:
    """The registry exception for a server error, or the error itself when it has no code
    of ours (connection failures stay psycopg.OperationalError so callers can retry)."""
    diag = getattr(exc, "diag", None)
    code = getattr(exc, "sqlstate", None) or (diag.sqlstate if diag else None)
    cls = REGISTRY.get(code or "")
    if cls is None:
        return exc
    message = diag.message_primary if diag and diag.message_primary else str(exc)
    mapped = cls(message, hint=diag.message_hint if diag else None, sqlstate=code)
    # Raised "from None" by the drivers: the psycopg error (its message again, and lines of
    # PL/pgSQL context) would double a traceback whose one line says it all. Kept here.
    mapped.server_error = exc
    return mapped


def first_line(exc: BaseException) -> str:
    """The server's primary message (or the error's first line), redacted: a libpq message
    may quote a malformed URL, password included. What a one-line error report says."""
    diag = getattr(exc, "diag", None)
    if diag is not None and getattr(diag, "message_primary", None):
        return redact.text(diag.message_primary)
    lines = str(exc).strip().splitlines()
    return redact.text(lines[0]) if lines else type(exc).__name__
