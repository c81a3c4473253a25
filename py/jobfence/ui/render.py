"""Templates and the headers every dashboard page carries."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.requests import Request
from starlette.responses import HTMLResponse

from .. import __version__
from ..dashboard import view
from ..jsonload import UndecodedJson
from .session import CSRF_FIELD, Viewer

HERE = Path(__file__).resolve().parent
TEMPLATES = HERE / "templates"
STATIC = HERE / "static"

# Scripts and styles come from /ui/static only: an injected <script> or inline handler does
# not run, whatever a payload or an error message holds.
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; script-src 'self'; style-src 'self'; "
                               "img-src 'self' data:; connect-src 'self'; object-src 'none'; "
                               "base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}


def when(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, datetime):
        return value.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"
    return str(value)


def iso(value) -> str:
    return value.astimezone(timezone.utc).isoformat() if isinstance(value, datetime) else ""


def pretty_json(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, UndecodedJson):
        # Stored JSON Python cannot decode: shown as PostgreSQL holds it.
        return str(value)
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True, default=str)


def _environment() -> Environment:
    env = Environment(loader=FileSystemLoader(str(TEMPLATES)),
                      autoescape=select_autoescape(["html"]), trim_blocks=True,
                      lstrip_blocks=True)
    env.filters.update(when=when, iso=iso, pretty_json=pretty_json, seconds=view.seconds,
                       percent=view.percent, rate=view.rate)
    env.globals.update(version=__version__, csrf_field=CSRF_FIELD)
    return env


ENV = _environment()


def page(request: Request, template: str, viewer: Viewer | None, *, http_status: int = 200,
         **context) -> HTMLResponse:
    base = request.scope.get("root_path", "") + "/ui"
    html = ENV.get_template(template).render(request=request, viewer=viewer, base=base,
                                             path=request.url.path, **context)
    return HTMLResponse(html, status_code=http_status, headers=dict(SECURITY_HEADERS))
