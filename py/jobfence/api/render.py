"""Rows -> JSON answers: timestamps ISO 8601, intervals and ages in seconds."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from starlette.responses import Response

from ..rows import Event, Job

# Columns of jobs.job shown as they are; attempt and links are added.
JOB_FIELDS = ("id", "kind", "queue", "status", "payload", "result", "error", "retry_count",
              "max_retries", "lease_version", "owned_by", "created_at", "updated_at",
              "claimed_at", "finished_at", "run_after", "lease_expires_at", "idempotency_key",
              "ordering_key", "parent_id", "pending_children", "has_dependents", "concurrency_key",
              "cancel_requested_at", "progress", "progress_at", "snoozes", "priority")
EVENT_FIELDS = ("id", "job_id", "at", "from_status", "to_status", "lease_version", "worker",
                "reason", "error")


def _default(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, Decimal):
        return float(value)
    return str(value)


class Json(Response):
    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return json.dumps(content, default=_default, separators=(",", ":")).encode()


def links(job_id: int) -> dict:
    return {"self": f"/jobs/{job_id}", "events": f"/jobs/{job_id}/events"}


def job_view(job: Job) -> dict:
    out = {name: getattr(job, name) for name in JOB_FIELDS}
    out["attempt"] = (job.retry_count or 0) + 1
    for name in ("lease_timeout", "timeout"):
        if name in job.extra:
            out[name] = job.extra[name]
    out["links"] = links(job.id)
    return out


def brief(job: Job, created: bool | None = None) -> dict:
    out = {"id": job.id, "kind": job.kind, "queue": job.queue, "status": job.status}
    if created is not None:
        out["created"] = created
    out["links"] = links(job.id)
    return out


def event_view(event: Event) -> dict:
    return {name: getattr(event, name) for name in EVENT_FIELDS}


def plain(row: dict) -> dict:
    """A dict row with intervals as seconds and numerics as numbers."""
    return {k: (v.total_seconds() if isinstance(v, timedelta)
                else float(v) if isinstance(v, Decimal) else v) for k, v in row.items()}
