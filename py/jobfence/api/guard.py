"""What every route checks before FastAPI reads its parameters and body: on a
state-changing route the ``Origin`` first (a page of another site is refused whatever it
holds), then the token (an anonymous caller learns nothing, not even that its JSON is
malformed), then the query string (a typo such as ``?statuss=failed`` must not silently
widen a listing), then the body's media type and encoding."""

from __future__ import annotations

import email.message
import json

from fastapi.routing import APIRoute
from starlette.requests import Request

from .auth import authorize
from .hosts import ORIGINS_ENV, origin_allowed
from .problems import ApiProblem

# Routes that ignore their query string: probes add cache-busting parameters.
LENIENT_QUERY = frozenset({"/healthz"})
JSON_MEDIA_TYPE = "application/json"
UTF8 = frozenset({"utf-8", "utf8"})
STATE_CHANGING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
INFINITY = float("inf")


def header_text(request: Request, name: str) -> str | None:
    """A header as UTF-8 text. The ASGI server hands over bytes and Starlette reads them as
    Latin-1, which would store ``é`` as ``Ã©``: a key sent in a header would then never
    equal the same key sent in a body."""
    value = request.headers.get(name)
    if value is None:
        return None
    try:
        return value.encode("latin-1").decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        raise ApiProblem(400, "bad_request", f"header {name}: not valid UTF-8",
                         errors=[{"location": f"header.{name}",
                                  "message": "not valid UTF-8"}]) from None


def _bad_body(message: str) -> ApiProblem:
    return ApiProblem(400, "bad_request", f"body: {message}",
                      errors=[{"location": "body", "message": message}])


def _check_origin(request: Request) -> None:
    if origin_allowed(request):
        return
    shown = (request.headers.get("origin") or "")[:100]
    raise ApiProblem(403, "origin_not_allowed",
                     f"Origin {shown!r} is neither this server's own nor one listed in "
                     f"{ORIGINS_ENV} (or --allowed-origin): a page of another site may not "
                     "change anything here",
                     errors=[{"location": "header.Origin", "message": "not an allowed origin"}])
def _finite(text: str) -> float:
    value = float(text)
    if value in (INFINITY, -INFINITY):
        raise ValueError(f"{text[:40]} is not finite as a double")
    return value


def _first_clause(exc: ValueError) -> str:
    # Python's own message ends with advice to whoever runs the interpreter.
    return str(exc).split("; use sys.", 1)[0]


def _check_media_type(request: Request) -> None:
    given = request.headers.get("content-type")
    if given is None:
        # Required even without a body: a page of another site can post a form or a
        # no-cors fetch with no type or a form type, but not application/json, which a
        # browser sends cross-site only after a preflight this API never approves.
        why = "missing: required on every POST, PUT, PATCH and DELETE, even without a body"
        raise ApiProblem(415, "unsupported_media_type",
                         f"send Content-Type: application/json ({why})",
                         errors=[{"location": "header.Content-Type", "message": why}])
    parsed = email.message.Message()
    parsed["content-type"] = given
    media = parsed.get_content_type()
    charset = (parsed.get_param("charset") or "utf-8")
    charset = charset.lower() if isinstance(charset, str) else ""
    if media == JSON_MEDIA_TYPE and charset in UTF8:
        return
    shown = given[:100]
    why = (f"charset {charset or '?'} is not supported: JSON is UTF-8"
           if media == JSON_MEDIA_TYPE else f"{shown} is not supported")
    raise ApiProblem(415, "unsupported_media_type",
                     f"the body must be JSON sent with Content-Type: application/json "
                     f"({why})",
                     errors=[{"location": "header.Content-Type", "message": why}])


async def _read_json(request: Request) -> None:
    body = await request.body()
    if not body:
        return
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _bad_body(f"not valid UTF-8 (byte offset {exc.start})") from None
    try:
        parsed = json.loads(text, parse_float=_finite)
    except json.JSONDecodeError as exc:
        raise _bad_body(f"malformed JSON at line {exc.lineno} column {exc.colno}: "
                        f"{exc.msg}") from None
    except RecursionError:
        raise _bad_body("JSON nested too deeply") from None
    except ValueError as exc:
        # An integer over Python's 4300 digits, or a float beyond the double range (_finite).
        # The SQL refuses what gets past this (22003); nothing decodes it portably.
        raise _bad_body(f"a number beyond the IEEE-754 double range ({_first_clause(exc)}); "
                        "send such a number as a string") from None
    # Starlette's Request.json() answers from this cache, so FastAPI validates the document
    # parsed here instead of parsing the bytes a second time with its own error messages.
    request._json = parsed


def _check_query(request: Request, known: frozenset[str]) -> None:
    counts: dict[str, int] = {}
    for name, _value in request.query_params.multi_items():
        counts[name] = counts.get(name, 0) + 1
    unknown = [name for name in counts if name not in known]
    repeated = [name for name in counts if name in known and counts[name] > 1]
    errors = ([{"location": f"query.{name[:100]}", "message": "unknown query parameter"}
               for name in unknown[:20]] +
              [{"location": f"query.{name}", "message": "given more than once"}
               for name in repeated])
    if not errors:
        return
    if unknown:
        listed = ", ".join(repr(name[:100]) for name in unknown[:20])
        detail = (f"unknown query parameter(s): {listed} "
                  f"(this route takes {', '.join(sorted(known)) or 'none'})")
    else:
        detail = f"query parameter(s) given more than once: {', '.join(repeated)}"
    raise ApiProblem(400, "bad_request", detail, errors=errors)


def _walk(dependant):
    yield dependant
    for dep in dependant.dependencies:
        yield from _walk(dep)


def _scope_needed(dependant) -> str | None:
    for dep in dependant.dependencies:
        found = getattr(dep.call, "scope", None) or _scope_needed(dep)
        if found:
            return found
    return None


class GuardedRoute(APIRoute):
    def get_route_handler(self):
        handler = super().get_route_handler()
        every = list(_walk(self.dependant))
        needed = _scope_needed(self.dependant)
        known = frozenset(param.alias for d in every for param in d.query_params)
        lenient = self.path in LENIENT_QUERY
        takes_body = any(d.body_params for d in every)
        changes_state = bool(set(self.methods or ()) & STATE_CHANGING)

        async def guarded(request: Request):
            if changes_state:
                _check_origin(request)
            if needed is not None:
                authorize(request, needed)
            if not lenient:
                _check_query(request, known)
            if changes_state or takes_body:
                _check_media_type(request)
            if takes_body:
                await _read_json(request)
            return await handler(request)

        return guarded
