"""Typed rows for the composite types of the SQL API (docs/design.md §4)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from uuid import UUID

from psycopg.rows import class_row, kwargs_row


@dataclass(frozen=True)
class Lease:
    """``jobs.lease``: what a claim hands the worker; (job_id, lease_version) is its fence.
    ``token`` is set when it came as a ``jobs.lease_grant`` (the ``*_with_token`` claims):
    the secret that proves this worker was handed the lease; never log it."""

    job_id: int
    lease_version: int
    kind: str
    queue: str
    payload: Any
    attempt: int
    lease_expires_at: datetime
    timeout_at: datetime
    token: UUID | None = field(default=None, repr=False)


@dataclass(frozen=True)
class Outcome:
    """``jobs.outcome``: the answer of complete / fail / cancel."""

    job_id: int
    accepted: bool
    status: str
    run_after: datetime | None
    wake: list[int] | None


@dataclass(frozen=True)
class Signal:
    """``jobs.signal``: a job id to push, to its queue's ready list or delayed set (those of
    its priority's band)."""

    job_id: int
    queue: str
    run_after: datetime | None
    priority: int | None = 0

    def push_tuple(self) -> tuple:
        """What ``Transport.push`` takes."""
        return (self.job_id, self.queue, self.run_after, self.priority)


@dataclass(frozen=True)
class Heartbeat:
    """``jobs.heartbeat``."""

    alive: bool
    cancel_requested: bool
    lease_expires_at: datetime | None


@dataclass(frozen=True)
class Beat:
    """A row of ``jobs.heartbeat_many``: ``held`` is true (lease extended), false (lease
    lost: reaped, reassigned or the job is gone) or None (the row was locked by someone
    else, e.g. a completion in flight: nothing was checked, ask again soon)."""

    job_id: int
    held: bool | None
    alive: bool | None
    cancel_requested: bool | None
    lease_expires_at: datetime | None


@dataclass(frozen=True)
class Job:
    """A ``jobs.job`` row as ``jobs.get`` returns it. Columns this version does not know land
    in ``extra`` so a newer schema does not break an older driver."""

    id: int
    kind: str
    queue: str
    status: str
    payload: Any = None
    result: Any = None
    error: str | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None
    claimed_at: datetime | None = None
    finished_at: datetime | None = None
    owned_by: str | None = None
    lease_version: int = 0
    retry_count: int = 0
    max_retries: int | None = None
    run_after: datetime | None = None
    lease_expires_at: datetime | None = None
    idempotency_key: str | None = None
    ordering_key: str | None = None
    parent_id: int | None = None
    pending_children: int | None = None
    cancel_requested_at: datetime | None = None
    priority: int = 0
    progress: Any = None
    progress_at: datetime | None = None
    snoozes: int = 0
    # Scoped idempotency keys: the states in which the job holds its key (None: always;
    # []: released) and when its hold ends.
    unique_states: list | None = None
    unique_until: datetime | None = None
    # Whether other jobs depend on this one (jobs.dependents lists them).
    has_dependents: bool = False
    # The key the kind's max_running_per_key counts it by (None: none).
    concurrency_key: str | None = None
    extra: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "extra"}
        out.update(self.extra)
        return out


@dataclass(frozen=True)
class Event:
    """A ``jobs.event`` row."""

    id: int
    job_id: int
    at: datetime
    from_status: str | None
    to_status: str | None
    lease_version: int | None
    worker: str | None
    reason: str | None
    error: str | None
    extra: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Neighbour:
    """A job next to another in the job graph: a row of ``jobs.dependencies`` (a job it
    depends on) or of ``jobs.dependents`` (a job depending on it), with the edge's policy and
    when the edge stopped holding the dependent back (``None``: still waiting)."""

    job_id: int
    kind: str
    status: str
    on_failure: str
    released_at: datetime | None


def enum_array(text: str) -> list[str]:
    """An array of enum labels in PostgreSQL's text form (psycopg knows no jobs.status[]):
    "{queued,processing}" -> ["queued", "processing"]. Job states need no quoting."""
    inner = text.strip("{}")
    return inner.split(",") if inner else []


def _tolerant(cls):
    known = {f.name for f in dataclasses.fields(cls)} - {"extra"}

    def make(**cols):
        extra = {k: v for k, v in cols.items() if k not in known}
        fields_ = {k: (str(v) if k in ("status", "from_status", "to_status") and v is not None
                       else v) for k, v in cols.items() if k in known}
        if isinstance(fields_.get("unique_states"), str):
            fields_["unique_states"] = enum_array(fields_["unique_states"])
        return cls(**fields_, extra=extra)

    return kwargs_row(make)


def _by_position(cls):
    """``class_row(cls)``, except that when the columns are the class's fields in order (the
    usual case: the statements select the composite types these classes mirror), a row is
    built from its values by position, without a keyword dict per row (about 1 us less per
    claimed lease) nor the frozen ``__init__``'s setattr per field (0.3 us more). Columns in
    any other order are matched by name, as ``class_row`` does."""
    fields = dataclasses.fields(cls)
    order = [f.name for f in fields]
    by_name = class_row(cls)
    new = object.__new__

    def factory(cursor):
        description = cursor.description
        if description is None or [c.name for c in description] != order[:len(description)]:
            return by_name(cursor)
        if (hasattr(cls, "__post_init__") or hasattr(cls, "__slots__")
                or any(f.default is dataclasses.MISSING for f in fields[len(description):])):
            return lambda values: cls(*values)  # and a missing field is named
        # A frozen dataclass's __init__ sets each field through object.__setattr__ (0.8 us
        # for a lease): the values go straight into the instance's dict instead. The classes
        # here have no __post_init__, and a trailing field left out (a lease's token) reads
        # its default from the class.
        names = order[:len(description)]

        def make(values):
            row = new(cls)
            row.__dict__.update(zip(names, values))
            return row
        return make

    return factory


LEASE = _by_position(Lease)
OUTCOME = _by_position(Outcome)
SIGNAL = _by_position(Signal)
HEARTBEAT = _by_position(Heartbeat)
BEAT = _by_position(Beat)
JOB = _tolerant(Job)
EVENT = _tolerant(Event)
NEIGHBOUR = class_row(Neighbour)


def split_created(job: Job) -> tuple[Job, bool]:
    """A row of the ``*_CREATED`` statements (``jobfence.sql``): the job without the extra
    ``created`` column, and that flag (false for an idempotent repeat)."""
    extra = dict(job.extra)
    created = bool(extra.pop("created", True))
    return dataclasses.replace(job, extra=extra), created
