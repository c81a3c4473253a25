"""Request bodies (validated: anything else is a 400) and the shapes of answers (documented
in the OpenAPI document; answers are built directly, not validated again)."""

from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone
from typing import Annotated, Any, Literal, Optional, Union

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictFloat, StrictInt, StrictStr

from ..db import spec_options

MAX_SPECS = 1000
# Seconds from now beyond this are a typo, not a schedule (and would overflow a datetime).
MAX_OFFSET_SECONDS = 100 * 365 * 86400

Status = Literal["queued", "processing", "done", "failed", "enqueue_failed"]


class FromNow(datetime):
    """A run_after given as seconds from now: a repeat of the request means another instant,
    so it is not held against a repeated key's job (jobs.repeat_differences)."""


def _when(value: Union[int, float, str]) -> datetime:
    if isinstance(value, str):
        try:
            when = datetime.fromisoformat(value)
        except ValueError:
            raise ValueError("run_after must be an ISO 8601 timestamp or a number of seconds "
                             "from now") from None
        return when if when.tzinfo else when.replace(tzinfo=timezone.utc)
    seconds = float(value)
    if not math.isfinite(seconds) or abs(seconds) > MAX_OFFSET_SECONDS:
        raise ValueError("run_after seconds must be finite and within 100 years")
    return FromNow.fromtimestamp((datetime.now(timezone.utc) + timedelta(seconds=seconds)).timestamp(),
                                 timezone.utc)


Debounce = Literal["payload", "run_after", "payload_and_run_after"]
# A period: seconds, or PostgreSQL's interval text ("1 hour"), which jobs.insert_jobs checks.
UniqueFor = Union[Annotated[StrictInt, Field(gt=0, le=MAX_OFFSET_SECONDS)],
                  Annotated[StrictFloat, Field(gt=0, le=MAX_OFFSET_SECONDS)],
                  Annotated[StrictStr, Field(min_length=1, max_length=100)]]


class SpecPosition(BaseModel):
    """An earlier spec of the same batch, by its position (from 0)."""
    model_config = ConfigDict(extra="forbid")
    spec: Annotated[StrictInt, Field(ge=0, lt=MAX_SPECS)]


# A job id, or (in a batch) an earlier spec's position; jobs.insert_jobs checks the rest.
Dependency = Union[Annotated[StrictInt, Field(gt=0)], SpecPosition]
OnDependencyFailure = Literal["fail", "run", "wait"]


RunAfter = Annotated[
    Union[StrictInt, StrictFloat, Annotated[StrictStr, Field(json_schema_extra={"format": "date-time"})]],
    AfterValidator(_when),
    Field(description="When the job becomes claimable: an ISO 8601 timestamp (UTC when it "
                      "has no offset) or a number of seconds from now. Default: now."),
]


class JobSpec(BaseModel):
    """What ``POST /jobs`` takes; the idempotency key travels in the Idempotency-Key header."""

    model_config = ConfigDict(extra="forbid")

    kind: StrictStr = Field(description="A kind declared with jobs.define_type.")
    payload: dict[str, Any] = Field(default_factory=dict, description="A JSON object of "
                                    "identifiers, at most the kind's max_payload_bytes.")
    run_after: Optional[RunAfter] = None
    ordering_key: Optional[StrictStr] = Field(None, description="Jobs with the same key run "
                                              "one at a time, in id order.")
    priority: Optional[Annotated[StrictInt, Field(ge=0, le=9)]] = Field(
        None, description="0 (runs first) to 9; null or absent: the kind's priority.")
    unique_while: Optional[list[Status]] = Field(
        None, min_length=1, description="The states in which the job holds its idempotency "
        "key (including queued); absent: every state, for good.")
    unique_for: Optional[UniqueFor] = Field(
        None, description="How long the job holds its idempotency key: seconds, or an "
        "interval such as \"1 hour\"; absent: no end.")
    debounce: Optional[Debounce] = Field(
        None, description="What a repeat of the key does to its job while it is queued: "
        "replace the payload, push run_after later, or both; absent: nothing.")
    depends_on: Optional[list[Dependency]] = Field(
        None, min_length=1, max_length=MAX_SPECS, description="Jobs this one waits for: ids, "
        "or in a batch {\"spec\": n} for an earlier spec of the same batch; absent: none.")
    on_dependency_failure: Optional[OnDependencyFailure] = Field(
        None, description="What a dependency that fails does to this job: fail it (the "
        "default), run it anyway, or wait for a replay. Only with depends_on.")
    concurrency_key: Optional[Annotated[StrictStr, Field(min_length=1, max_length=200)]] = Field(
        None, description="A tenant, a customer: the key the kind's max_running_per_key "
        "counts running jobs by, and the keys of a queue take turns at claim; absent: none.")

    def dependencies(self) -> list | None:
        """depends_on as jobs.insert_jobs takes it."""
        return None if self.depends_on is None else [
            d.model_dump() if isinstance(d, SpecPosition) else d for d in self.depends_on]

    def spec(self, idempotency_key: str | None = None) -> dict:
        out: dict[str, Any] = {"kind": self.kind, "payload": self.payload}
        out.update(spec_options(self.unique_while, self.unique_for, self.debounce,
                                depends_on=self.dependencies(),
                                on_dependency_failure=self.on_dependency_failure,
                                concurrency_key=self.concurrency_key, current=False))
        out = {k: v for k, v in out.items() if v is not None}
        if self.priority is not None:
            out["priority"] = self.priority
        if self.run_after is not None:
            out["run_after"] = self.run_after
        if self.ordering_key is not None:
            out["ordering_key"] = self.ordering_key
        if idempotency_key is not None:
            out["idempotency_key"] = idempotency_key
        return out

    def compared(self, idempotency_key: str | None = None) -> dict:
        """The spec a repeated key's job is held to: a relative run_after is left out."""
        out = self.spec(idempotency_key)
        if isinstance(self.run_after, FromNow):
            out.pop("run_after")
        return out


class BatchSpec(JobSpec):
    """A job of a batch or a fan-out: its idempotency key is part of the spec."""

    idempotency_key: Optional[StrictStr] = Field(None, description="Unique per kind: a "
                                                 "repeat returns the existing job.")

    def spec(self, idempotency_key: str | None = None) -> dict:
        return super().spec(self.idempotency_key)

    def compared(self, idempotency_key: str | None = None) -> dict:
        return super().compared(self.idempotency_key)


class BatchRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    jobs: list[BatchSpec] = Field(min_length=1, max_length=MAX_SPECS)


class FanOutRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    children: list[BatchSpec] = Field(max_length=MAX_SPECS)
    then: BatchSpec = Field(description="The coordinator: claimable once every child ended. "
                            "An idempotency_key here makes the whole fan-out replay-safe.")


class CancelRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    reason: Optional[StrictStr] = Field(None, description="Stored as the job's error "
                                        "(default: cancelled).")


class ReplayManyRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    kind: Optional[StrictStr] = Field(None, description="Only this kind; null or absent: "
                                      "every kind.")
    error_like: Optional[Annotated[StrictStr, Field(max_length=4096)]] = Field(
        None, description="A LIKE pattern the job's error must match, e.g. `%timeout%`.")
    failed_since: Optional[Annotated[datetime, AfterValidator(
        lambda when: when if when.tzinfo else when.replace(tzinfo=timezone.utc))]] = Field(
        None, description="Only jobs that failed at or after this time (ISO 8601; UTC when "
                          "it has no offset).")
    max_jobs: Annotated[StrictInt, Field(ge=1, le=10000)] = Field(
        1000, description="At most this many, oldest failure first; call again for the rest.")


# -- answers (documentation only) ------------------------------------------------------------
class Answer(BaseModel):
    # additionalProperties: false in the document, so a field answered but not described
    # fails the fuzz test's response-schema check instead of going unnoticed.
    model_config = ConfigDict(extra="forbid")


class Links(Answer):
    self: str
    events: str


class Accepted(Answer):
    id: int
    kind: str
    queue: str
    status: Status
    created: bool = Field(description="false: an idempotent repeat returned an existing job.")
    enqueued: bool = Field(description="false: the push to Redis failed after commit; the "
                           "job is enqueue_failed and the reaper will signal it.")
    run_after: Optional[datetime] = None
    detail: Optional[str] = None
    links: Links


class JobView(Answer):
    id: int
    kind: str
    queue: str
    status: Status
    payload: Union[dict[str, Any], str, None] = Field(
        None, description="The job's JSON object; a string holding its JSON text when it "
        "holds a value the server's JSON reader cannot decode (stored before such numbers "
        "were refused, see docs/reliability.md).")
    result: Any = Field(None, description="What the handler returned; the same string form "
                        "as payload when it cannot be decoded.")
    error: Optional[str] = None
    attempt: int = Field(description="retry_count + 1: the attempt running, or the last one.")
    retry_count: int
    max_retries: Optional[int] = None
    lease_version: int
    owned_by: Optional[str] = None
    created_at: Optional[datetime] = None
    updated_at: Optional[datetime] = None
    claimed_at: Optional[datetime] = None
    finished_at: Optional[datetime] = None
    run_after: Optional[datetime] = None
    lease_expires_at: Optional[datetime] = None
    idempotency_key: Optional[str] = None
    ordering_key: Optional[str] = None
    parent_id: Optional[int] = None
    pending_children: Optional[int] = Field(None, description="Children of a fan-out and "
                                            "dependencies it still waits for.")
    has_dependents: bool = Field(False, description="Whether other jobs depend on this one.")
    concurrency_key: Optional[str] = Field(None, description="The key the kind's "
                                           "max_running_per_key counts the job by.")
    cancel_requested_at: Optional[datetime] = None
    priority: int = Field(0, description="0 (runs first) to 9.")
    progress: Any = Field(None, description="What the handler last reported with "
                          "jobs.progress (kept after the job ends).")
    progress_at: Optional[datetime] = None
    snoozes: int = Field(0, description="How often the job snoozed (jobs.snooze); they spend "
                         "no retry budget.")
    lease_timeout: Optional[float] = Field(None, description="The kind's lease, seconds.")
    timeout: Optional[float] = Field(None, description="The kind's run-time limit, seconds.")
    links: Links


class BatchItem(Answer):
    id: int
    kind: str
    queue: str
    status: Status
    created: bool
    links: Links


class BatchAccepted(Answer):
    jobs: list[BatchItem]
    enqueued: bool
    detail: Optional[str] = None


class FanOutAccepted(Accepted):
    children: list[BatchItem]


class EventView(Answer):
    id: int
    job_id: int
    at: datetime
    from_status: Optional[Status] = None
    to_status: Optional[Status] = None
    lease_version: Optional[int] = None
    worker: Optional[str] = None
    reason: Optional[str] = None
    error: Optional[str] = None


class Events(Answer):
    events: list[EventView]


class Children(Answer):
    children: list[JobView]


class JobPage(Answer):
    jobs: list[JobView]
    next: Optional[str] = Field(description="The next page, or null after the last.")


class CancelAnswer(Answer):
    id: int
    accepted: bool
    status: Status
    enqueued: bool
    links: Links


class ReplayAnswer(Answer):
    id: int
    replayed: bool
    status: Status
    enqueued: bool
    links: Links


class ReplayManyAnswer(Answer):
    replayed: int = Field(description="How many failed jobs are queued again.")
    ids: list[int] = Field(description="Their ids, oldest failure first.")
    enqueued: bool = Field(description="false: the push to Redis failed; the jobs are "
                           "enqueue_failed and the reaper signals them.")


class QueueRow(Answer):
    queue: str
    kind: str
    queued_ready: int
    queued_delayed: int
    queued_blocked: int
    processing: int
    processing_expired: int
    enqueue_failed: int
    oldest_ready_age: Optional[float] = Field(None, description="seconds")


class Queues(Answer):
    queues: list[QueueRow]


class Health(Answer):
    status: Literal["ok", "degraded"]
    degraded: bool = Field(description="true: Redis does not answer; jobs are still "
                           "accepted (202, `enqueued: false`) and signalled by the reaper.")
    postgresql: Literal["ok"]
    redis: str = Field(description="`ok`, or why Redis does not answer.")


class ProblemError(Answer):
    location: str = Field(description="Where: `body.jobs.3.kind`, `query.limit`, "
                          "`header.Content-Type`, ...")
    message: str


class Problem(Answer):
    """RFC 9457 problem details, with the SQLSTATE when PostgreSQL refused the request."""

    type: str
    title: str
    status: int
    detail: str
    name: str
    sqlstate: Optional[str] = None
    hint: Optional[str] = Field(None, description="PostgreSQL's HINT, when it gave one.")
    errors: Optional[list[ProblemError]] = Field(None, description="Each problem of a "
                                                 "request that is not well formed.")
    checks: Optional[dict[str, str]] = Field(None, description="GET /healthz: `ok`, or why "
                                             "a server does not answer.")
    job_status: Optional[Status] = Field(None, description="409 of cancel or replay: the "
                                         "status the job has.")
