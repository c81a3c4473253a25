"""Bearer tokens and their scopes.

``JOBFENCE_API_TOKENS`` holds ``TOKEN[:SCOPE]`` entries separated by commas. A presented
token is compared with every configured one by ``hmac.compare_digest`` (no early exit), so
the time an answer takes says nothing about how much of a token was right. Tokens are never
logged, never echoed in a problem, and never part of a metric label.
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from .problems import ApiProblem

PRODUCER = "producer"
ADMIN = "admin"
# What each scope may do; admin holds every right producer holds.
SCOPES = {PRODUCER: frozenset({PRODUCER}), ADMIN: frozenset({PRODUCER, ADMIN})}
DEFAULT_SCOPE = PRODUCER
# A short token can be guessed over the network; `openssl rand -hex 24` gives 48.
MIN_TOKEN_CHARS = 16


class TokenError(ValueError):
    """JOBFENCE_API_TOKENS cannot be read; the message never contains a token."""


@dataclass(frozen=True)
class Token:
    secret: bytes
    scope: str


def parse_tokens(raw: str | None) -> list[Token]:
    """``"abc:admin, def"`` -> [Token(b"abc", "admin"), Token(b"def", "producer")]."""
    tokens = []
    for position, entry in enumerate((raw or "").split(",")):
        entry = entry.strip()
        if not entry:
            continue
        secret, colon, scope = entry.rpartition(":")
        if not colon:
            secret, scope = entry, DEFAULT_SCOPE
        if scope not in SCOPES:
            raise TokenError(f"JOBFENCE_API_TOKENS entry {position + 1}: unknown scope "
                             f"{scope!r} (known: {', '.join(SCOPES)})")
        if not secret or any(c.isspace() for c in secret):
            raise TokenError(f"JOBFENCE_API_TOKENS entry {position + 1}: a token must be "
                             "non-empty and without spaces")
        if len(secret) < MIN_TOKEN_CHARS:
            raise TokenError(f"JOBFENCE_API_TOKENS entry {position + 1}: a token must be at "
                             f"least {MIN_TOKEN_CHARS} characters (try `openssl rand -hex "
                             "24`)")
        tokens.append(Token(secret.encode(), scope))
    return tokens


class Authenticator:
    """Which scope a request holds. ``tokens=None`` is ``--no-auth``: every request is admin."""

    def __init__(self, tokens: list[Token] | None):
        self.tokens = tokens

    def scope_of(self, presented: str | None) -> str | None:
        if self.tokens is None:
            return ADMIN
        if not presented:
            return None
        # The header's bytes as sent (Starlette decoded them as Latin-1), so a token with
        # non-ASCII characters matches its UTF-8 configuration.
        candidate = presented.encode("latin-1", "replace")
        found = None
        for token in self.tokens:
            # Every token is compared, whether or not one matched already.
            if hmac.compare_digest(candidate, token.secret) and found is None:
                found = token.scope
        return found


_bearer = HTTPBearer(auto_error=False, description="A token of JOBFENCE_API_TOKENS.")


def presented_token(request: Request) -> str | None:
    scheme, _, credentials = (request.headers.get("authorization") or "").partition(" ")
    return credentials.strip() if scheme.lower() == "bearer" else None


def authorize(request: Request, scope: str) -> str:
    """The scope the request holds: 401 without a known token, 403 when it lacks ``scope``."""
    auth: Authenticator = request.app.state.auth
    held = auth.scope_of(presented_token(request))
    if held is None:
        raise ApiProblem(401, "unauthorized",
                         "a valid bearer token is required: Authorization: Bearer TOKEN",
                         headers={"WWW-Authenticate": 'Bearer realm="jobfence"'})
    if scope not in SCOPES[held]:
        raise ApiProblem(403, "forbidden",
                         f"this token's scope ({held}) does not allow this; it needs "
                         f"the {scope} scope")
    # Which login serves the request (routes._client) follows the scope it holds.
    request.state.scope = held
    return held


def require(scope: str):
    """A dependency naming the scope a route needs. ``guard.GuardedRoute`` checks it before
    the body is read; the check here repeats it for a route mounted without that class.
    The bearer parameter documents the security scheme in the OpenAPI document."""

    async def check(request: Request,
                    _credentials: HTTPAuthorizationCredentials | None = Depends(_bearer)) -> str:
        return authorize(request, scope)

    check.scope = scope
    return check
