"""The dashboard's pages (docs/ui.md). Reads go through the API's ``AsyncClient``; the two
actions, cancel and replay, are the calls the API's own routes make."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Optional
from urllib.parse import urlencode

import psycopg
from fastapi import APIRouter, Request
from starlette.responses import RedirectResponse, Response

from .. import rows, sql
from ..dashboard import view
from ..api.problems import STATUS_OF, missing_grant
from ..errors import JobfenceError, JobNotFound
from ..names import NAME, name_hint
from ..transport import MAX_JOB_ID
from . import queries
from .render import page
from .session import (COOKIE, CSRF_FIELD, MAX_AGE_SECONDS, Sessions, Viewer, csrf_ok,
                      same_origin, secure_request)

router = APIRouter(prefix="/ui", include_in_schema=False)

STATUSES = ("queued", "processing", "done", "failed", "enqueue_failed")
PAGE_SIZES = (25, 50, 100, 200)
CANCELLABLE = ("queued", "processing", "enqueue_failed")


class LoginRequired(Exception):
    pass


class Refused(Exception):
    def __init__(self, status: int, title: str, detail: str):
        super().__init__(detail)
        self.status, self.title, self.detail = status, title, detail


def _sessions(request: Request) -> Sessions:
    return request.app.state.ui_sessions


def _client(request: Request):
    # The dashboard reads views only jobs_admin may read, and its two actions are admin's:
    # it runs as the admin login when there is one (api/logins.py).
    return getattr(request.app.state, "admin_client", None) or request.app.state.client


def _viewer(request: Request) -> Viewer:
    found = _sessions(request).viewer(request)
    if found is None:
        raise LoginRequired()
    return found


async def _acting(request: Request):
    """The viewer of a state-changing form, its fields read: 403 unless the scope allows
    acting, the Origin is this host and the CSRF token is the session's."""
    viewer = _viewer(request)
    form = await request.form()
    if not same_origin(request):
        raise Refused(403, "Refused", "this form was posted from another site")
    if not csrf_ok(viewer, form.get(CSRF_FIELD)):
        raise Refused(403, "Refused", "the form's CSRF token is missing or not this session's; "
                                      "reload the page and try again")
    if not viewer.can_act:
        raise Refused(403, "Forbidden", f"this token's scope ({viewer.scope}) may look but not "
                                        "act; cancel and replay need an admin token")
    return viewer, form


def _safe_next(target: str | None) -> str:
    # Only a path of this dashboard: never another host (//evil, https://evil).
    if target and target.startswith("/ui") and not target.startswith("//") and "\\" not in target:
        return target
    return "/ui"


def install_handlers(app) -> None:
    @app.exception_handler(LoginRequired)
    async def _login(request: Request, _exc: LoginRequired):
        target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        login = "/ui/login?" + urlencode({"next": target})
        if request.headers.get("hx-request"):
            # htmx follows a redirect silently and would swap the login page into a table.
            return Response(status_code=401, headers={"HX-Redirect": login})
        return RedirectResponse(login, status_code=303)

    @app.exception_handler(Refused)
    async def _refused(request: Request, exc: Refused):
        return page(request, "error.html", _sessions(request).viewer(request),
                    http_status=exc.status, title=exc.title, detail=exc.detail)

    # A page, not a problem document, when PostgreSQL is down or refuses a dashboard read;
    # the API's routes keep their handlers.
    for kind, status, title in ((psycopg.OperationalError, 503, "PostgreSQL does not answer"),
                                (psycopg.errors.InsufficientPrivilege, 500, "Missing database grant"),
                                (JobfenceError, None, "Refused by PostgreSQL")):
        _page_for_ui(app, kind, status, title)


def _page_for_ui(app, kind, status: int | None, title: str) -> None:
    api_handler = app.exception_handlers[kind]

    async def handle(request: Request, exc: Exception):
        if not request.url.path.startswith("/ui/") and request.url.path != "/ui":
            return await api_handler(request, exc)
        code = status or next((c for cls, c in STATUS_OF.items() if isinstance(exc, cls)), 500)
        if isinstance(exc, JobfenceError):
            detail, hint = f"{exc.message} ({exc.sqlstate})", exc.hint
        elif isinstance(exc, psycopg.errors.InsufficientPrivilege):
            detail, hint = missing_grant(exc)
        else:
            detail, hint = "the dashboard could not read PostgreSQL; reload to try again", None
        return page(request, "error.html", _sessions(request).viewer(request), http_status=code,
                    title=title, detail=detail, hint=hint)

    app.add_exception_handler(kind, handle)


# -- sign in and out --------------------------------------------------------------------------
@router.get("/login")
async def login_form(request: Request, next: Optional[str] = None):
    if _sessions(request).viewer(request) is not None:
        return RedirectResponse(_safe_next(next), status_code=303)
    return page(request, "login.html", None, next=_safe_next(next))


@router.post("/login")
async def login(request: Request):
    sessions = _sessions(request)
    form = await request.form()
    target = _safe_next(form.get("next"))
    if sessions.open:
        return RedirectResponse(target, status_code=303)
    if not same_origin(request):
        raise Refused(403, "Refused", "this form was posted from another site")
    token = (form.get("token") or "").strip()
    scope = sessions.scope_of_token(token) if token else None
    if scope is None:
        return page(request, "login.html", None, http_status=401, next=target,
                    error="That token is not one of JOBFENCE_API_TOKENS.")
    answer = RedirectResponse(target, status_code=303)
    answer.set_cookie(COOKIE, sessions.cookie_for(token), max_age=MAX_AGE_SECONDS, path="/ui",
                      httponly=True, samesite="strict", secure=secure_request(request))
    return answer


@router.post("/logout")
async def logout(request: Request):
    viewer = _viewer(request)
    form = await request.form()
    if not same_origin(request) or not csrf_ok(viewer, form.get(CSRF_FIELD)):
        raise Refused(403, "Refused", "the form's CSRF token is missing or not this session's")
    answer = RedirectResponse("/ui/login", status_code=303)
    answer.delete_cookie(COOKIE, path="/ui", httponly=True, samesite="strict",
                         secure=secure_request(request))
    return answer


# -- overview ---------------------------------------------------------------------------------
def _chart_data(ov: queries.Overview) -> str:
    m = ov.minutes
    starts = [int(s.timestamp()) for s in m.starts]
    # Only kinds that did something in the charted minutes: a line of zeros per idle kind
    # would bury the ones that matter.
    active = {kind: cols for kind, cols in m.counts.items()
              if any(cols["submitted"]) or any(cols["succeeded"]) or any(cols["failed"])}
    throughput = {kind: cols["succeeded"] for kind, cols in active.items()}
    failure = {}
    for kind, cols in active.items():
        failure[kind] = [None if (ok + bad) == 0 else round(bad / (ok + bad) * 100, 2)
                         for ok, bad in zip(cols["succeeded"], cols["failed"])]
    # An attribute value, escaped by the template (htmx drops <script> elements it swaps in).
    return json.dumps({"t": starts, "throughput": throughput, "failure": failure,
                       "submitted": m.total("submitted")})


async def _overview_context(request: Request) -> dict:
    # Observation only: a hot standby when the API was given --read-database-url.
    ov = await queries.overview(request.app.state.read_client)
    return {"kinds": view.kinds_table(ov.snap, view.TOP_COLUMNS),
            "depth": view.depth_table(ov.snap), "caption": view.window_caption(ov.snap),
            "taken_at": ov.snap.taken_at, "chart_json": _chart_data(ov), "paused": ov.paused,
            "chart_empty": not any(any(cols[c]) for cols in ov.minutes.counts.values()
                                   for c in ("submitted", "succeeded", "failed")),
            "dead_total": sum(int(r.get("dead_lettered") or 0) for r in ov.snap.metrics),
            "chart_minutes": queries.CHART_MINUTES}


@router.get("")
async def overview(request: Request):
    viewer = _viewer(request)
    return page(request, "overview.html", viewer, **await _overview_context(request))


@router.get("/fragments/overview")
async def overview_fragment(request: Request):
    viewer = _viewer(request)
    return page(request, "_overview.html", viewer, **await _overview_context(request))


# -- jobs -------------------------------------------------------------------------------------
def _bad_filter(detail: str) -> Refused:
    return Refused(400, "Bad filter", detail)


def _parse_before(text: str) -> datetime:
    try:
        moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise _bad_filter(f"submitted before: {text[:60]!r} is not a date and time "
                          "(2026-12-01T10:30 or 2026-12-01T10:30:00Z)") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


async def _id_submitted_before(client, moment: datetime) -> int | None:
    """The first id submitted at or after ``moment``, to start a page below it.

    Ids are handed out in submission order, so a binary search over them finds the moment
    with O(log n) one-row reads of ``jobs.list_jobs`` (a primary-key step each, whatever
    the table's size); ``before_id`` skips ids that were pruned. None: every job is older.
    """
    newest = await client.list_jobs(max_jobs=1)
    if not newest or newest[0].created_at < moment:
        return None
    lo, hi = 1, newest[0].id          # created_at(hi) >= moment
    while lo < hi:
        mid = (lo + hi) // 2
        below = await client.list_jobs(before_id=mid + 1, max_jobs=1)
        # No job at or below mid (pruned): nothing there is newer than the moment either.
        if not below or below[0].created_at < moment:
            lo = mid + 1
        else:
            hi = mid
    return lo


@router.get("/jobs")
async def jobs(request: Request, kind: Optional[str] = None, status: Optional[str] = None,
               queue: Optional[str] = None, after: Optional[str] = None,
               before: Optional[str] = None, limit: Optional[str] = None,
               ordering_key: Optional[str] = None):
    viewer = _viewer(request)
    kind = (kind or "").strip() or None
    queue = (queue or "").strip() or None
    ordering_key = ordering_key or None
    if ordering_key is not None and len(ordering_key) > 200:
        raise _bad_filter("ordering key is longer than 200 characters")
    status = (status or "").strip() or None
    before = (before or "").strip() or None
    if kind is not None and not NAME.fullmatch(kind):
        raise _bad_filter(f"kind {kind[:100]!r} is malformed. {name_hint('Kind')}")
    if queue is not None and not NAME.fullmatch(queue):
        raise _bad_filter(f"queue {queue[:100]!r} is malformed")
    if status is not None and status not in STATUSES:
        raise _bad_filter(f"status {status[:40]!r} is not one of {', '.join(STATUSES)}")
    size = 50
    if limit:
        if not limit.isdigit() or int(limit) not in PAGE_SIZES:
            raise _bad_filter(f"limit must be one of {', '.join(map(str, PAGE_SIZES))}")
        size = int(limit)
    below = None
    if after:
        if not after.isdigit() or not 1 <= int(after) <= MAX_JOB_ID:
            raise _bad_filter("after must be a job id")
        below = int(after)
    client = _client(request)
    if before is not None and below is None:
        below = await _id_submitted_before(client, _parse_before(before))
        if below is None:
            below = MAX_JOB_ID
    found = await client.list_jobs(kind=kind, status=status, queue=queue, before_id=below,
                                   max_jobs=size, ordering_key=ordering_key)
    filters = {k: v for k, v in (("kind", kind), ("status", status), ("queue", queue),
                                 ("ordering_key", ordering_key), ("limit", limit)) if v}
    following = None
    if len(found) == size:
        following = "/ui/jobs?" + urlencode({**filters, "after": found[-1].id})
    return page(request, "jobs.html", viewer, jobs=found, kind=kind or "", status=status or "",
                queue=queue or "", ordering_key=ordering_key or "", before=before or "",
                limit=size, statuses=STATUSES,
                sizes=PAGE_SIZES, following=following, paged=bool(after),
                first="/ui/jobs?" + urlencode(filters) if filters else "/ui/jobs",
                kinds=await _kind_names(client))


async def _kind_names(client) -> list[str]:
    return [r["kind"] for r in await client._all(sql.TYPES, None)]


def _leases(events: list[rows.Event]) -> dict[int, str]:
    """How each lease ended, by lease_version: a lease the reaper took back, or one whose
    job was cancelled under it, belonged to a worker whose later writes were refused."""
    ended: dict[int, str] = {}
    holding = None
    for e in events:
        if e.reason == "claimed":
            holding = e.lease_version
        elif holding is not None and e.from_status == "processing" \
                and e.reason in ("reaped", "timed_out", "cancelled"):
            ended[holding] = e.reason
            holding = None
        elif e.from_status == "processing":
            holding = None
    return ended


# What an action's redirect may announce on the job page: a fixed text per outcome, so a
# link cannot put words of its own on the page.
NOTICES = {
    "replayed": "Replayed: the job is queued again with a fresh retry budget.",
    "replay_parked": "Replayed, but Redis did not take the signal: the job is enqueue_failed "
                     "and the reaper will signal it.",
    "was_done": "The job is done: replay re-drives failed jobs only; nothing was changed.",
    "cancelled": "Cancelled: the job is failed now.",
    "cancel_requested": "Cancel requested: its worker is told at its next heartbeat.",
    "had_ended": "The job had already ended; nothing was cancelled.",
}


@router.get("/jobs/{job_id}")
async def job(request: Request, job_id: int, done: Optional[str] = None):
    viewer = _viewer(request)
    client = _client(request)
    if not 1 <= job_id <= MAX_JOB_ID:
        raise Refused(404, "No such job", f"job {job_id} does not exist")
    try:
        found = await client.get(job_id)
    except JobNotFound:
        raise Refused(404, "No such job", f"job {job_id} does not exist (or was pruned)") from None
    events = await client.events(job_id)
    children = await client.children(job_id)
    depends_on = await client.dependencies(job_id)
    # has_dependents stays true once set: the read is skipped for the jobs no edge names.
    dependents = await client.dependents(job_id) if found.has_dependents else []
    return page(request, "job.html", viewer, job=found, events=events, children=children,
                depends_on=depends_on, dependents=dependents,
                superseded=_leases(events), attempt=(found.retry_count or 0) + 1,
                can_replay=found.status == "failed",
                can_cancel=found.status in CANCELLABLE and found.cancel_requested_at is None,
                notice=NOTICES.get(done or ""))


@router.get("/jobs/{job_id}/confirm")
async def confirm(request: Request, job_id: int, action: str = ""):
    viewer = _viewer(request)
    if action not in ("replay", "cancel"):
        raise Refused(400, "Unknown action", "action must be replay or cancel")
    if not viewer.can_act:
        raise Refused(403, "Forbidden", f"this token's scope ({viewer.scope}) may look but not "
                                        "act; cancel and replay need an admin token")
    try:
        found = await _client(request).get(job_id)
    except JobNotFound:
        raise Refused(404, "No such job", f"job {job_id} does not exist") from None
    return page(request, "confirm.html", viewer, job=found, action=action)


@router.post("/jobs/{job_id}/replay")
async def replay(request: Request, job_id: int):
    await _acting(request)
    # A refusal (JB003: not failed any more) is shown by the handler above, with its SQLSTATE.
    replayed, enqueued = await _client(request).replay(job_id)
    if replayed and not enqueued:
        request.app.state.metrics.not_enqueued.inc()
    done = "replayed" if replayed and enqueued else "replay_parked" if replayed else "was_done"
    return RedirectResponse(f"/ui/jobs/{job_id}?done={done}", status_code=303)


@router.post("/jobs/{job_id}/cancel")
async def cancel(request: Request, job_id: int):
    await _acting(request)
    outcome, _enqueued = await _client(request).cancel(job_id, "cancelled from the dashboard")
    done = ("had_ended" if not outcome.accepted else
            "cancel_requested" if outcome.status == "processing" else "cancelled")
    return RedirectResponse(f"/ui/jobs/{job_id}?done={done}", status_code=303)


# -- dead letters -----------------------------------------------------------------------------
@router.get("/dead-letters")
async def dead_letters(request: Request, kind: Optional[str] = None):
    viewer = _viewer(request)
    kind = (kind or "").strip() or None
    if kind is not None and not NAME.fullmatch(kind):
        raise _bad_filter(f"kind {kind[:100]!r} is malformed. {name_hint('Kind')}")
    groups, scanned = await queries.dead_letter_groups(_client(request), kind)
    return page(request, "dead_letters.html", viewer, groups=groups, scanned=scanned,
                scan_limit=queries.DEAD_LETTER_SCAN, kind=kind or "",
                kinds=await _kind_names(_client(request)))


def _ids_of(form_items) -> list[int]:
    ids = []
    for value in form_items:
        for part in str(value).split(","):
            part = part.strip()
            if not part:
                continue
            if not part.isdigit() or not 1 <= int(part) <= MAX_JOB_ID:
                raise _bad_filter(f"{part[:30]!r} is not a job id")
            ids.append(int(part))
    return ids


def _group_of(text: str | None) -> tuple[str, str] | None:
    if not text:
        return None
    try:
        found = json.loads(text)
        kind, error = found["kind"], found["error"]
    except (ValueError, KeyError, TypeError):
        raise _bad_filter("group: not a group of this page") from None
    if not isinstance(kind, str) or not NAME.fullmatch(kind) or not isinstance(error, str):
        raise _bad_filter("group: not a group of this page")
    return kind, error


@router.post("/dead-letters/replay")
async def replay_dead_letters(request: Request):
    """Replay a group (every failed job of a kind with that exact error, jobs.replay_many)
    or the jobs of the selected groups (jobs.replay each, one transaction)."""
    viewer, form = await _acting(request)
    group = _group_of(form.get("group"))
    ids = [] if group else _ids_of(form.getlist("ids"))
    if not group and not ids:
        raise Refused(400, "Nothing selected", "select at least one group or job to replay")
    if len(set(ids)) > queries.MAX_REPLAY:
        raise Refused(400, "Too many", f"at most {queries.MAX_REPLAY} jobs per replay")
    if form.get("confirmed") != "yes":
        what = (f"every failed {group[0]} job with this error" if group else
                f"{len(set(ids))} job{'s' if len(set(ids)) != 1 else ''}")
        return page(request, "replay_confirm.html", viewer, ids=sorted(set(ids)), group=group,
                    what=what,
                    group_value=form.get("group") or "", limit=queries.MAX_REPLAY)
    client = _client(request)
    if group:
        summary = await queries.replay_group(client, *group)
    else:
        summary = await queries.replay_ids(client, ids)
    if summary.replayed and not summary.enqueued:
        request.app.state.metrics.not_enqueued.inc(len(summary.replayed))
    return page(request, "replay_summary.html", viewer, summary=summary, group=group,
                limit=queries.MAX_REPLAY)


# -- health -----------------------------------------------------------------------------------
@router.get("/health")
async def health(request: Request):
    viewer = _viewer(request)
    found = await queries.health(_client(request))
    last_reap = found.minutes.last_minute_with("reaped") if found.minutes else None
    reaped = sum(found.minutes.total("reaped")) if found.minutes else 0
    return page(request, "health.html", viewer, health=found, last_reap=last_reap,
                reaped=reaped, chart_minutes=queries.CHART_MINUTES,
                running_limit=queries.RUNNING_SCAN,
                http_status=200 if found.checks["postgresql"] == "ok" else 503)
