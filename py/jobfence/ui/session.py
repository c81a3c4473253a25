"""Who is looking at the dashboard, and whether a form really came from it.

A browser is authenticated as the API is (``api/auth.py``): by a bearer header, or by a
session cookie that ``/ui/login`` sets once a valid token was typed in. The cookie holds no
token: it holds the SHA-256 of one, a random nonce and a timestamp, signed with a key derived
from every configured token. Removing a token from ``JOBFENCE_API_TOKENS`` therefore ends
its sessions at the next restart, and processes configured alike accept each other's
cookies (several API instances behind one load balancer).

Every state-changing form carries a CSRF token bound to the session (to its nonce; to the
token's digest for a bearer header) and is refused unless its ``Origin``, when the browser
sends one, is this host.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass

from itsdangerous import BadSignature, URLSafeTimedSerializer
from starlette.requests import Request

from ..api.auth import ADMIN, SCOPES, Authenticator, presented_token
from ..api.hosts import origin_allowed

COOKIE = "jobfence_session"
# An operator's working day; after it the token is asked for again.
MAX_AGE_SECONDS = 12 * 3600
CSRF_FIELD = "csrf"


@dataclass(frozen=True)
class Viewer:
    scope: str
    csrf: str
    # "cookie", "bearer" or "open" (--no-auth): whether there is a session to sign out of.
    via: str

    @property
    def can_act(self) -> bool:
        return ADMIN in SCOPES[self.scope]


def _digest(secret: bytes) -> bytes:
    return hashlib.sha256(secret).digest()


class Sessions:
    def __init__(self, auth: Authenticator):
        self.auth = auth
        tokens = auth.tokens
        if tokens is None:
            # --no-auth: nothing to sign in with; the key only binds CSRF tokens to this process.
            key = secrets.token_bytes(32)
        else:
            key = hashlib.sha256(b"jobfence-ui-session\0" + b"\0".join(
                sorted(t.secret for t in tokens))).digest()
        self._key = key
        self._signer = URLSafeTimedSerializer(key, salt="jobfence-ui-session")

    @property
    def open(self) -> bool:
        return self.auth.tokens is None

    def _csrf(self, bound_to: str) -> str:
        return hmac.new(self._key, b"csrf\0" + bound_to.encode(), hashlib.sha256).hexdigest()

    def scope_of_token(self, presented: str) -> str | None:
        return self.auth.scope_of(presented)

    def cookie_for(self, presented: str) -> str:
        secret = presented.encode("utf-8")
        return self._signer.dumps({"t": _digest(secret).hex(), "n": secrets.token_urlsafe(16)})

    def _scope_of_digest(self, digest_hex: str) -> str | None:
        try:
            wanted = bytes.fromhex(digest_hex)
        except (TypeError, ValueError):
            return None
        found = None
        for token in self.auth.tokens or ():
            # As Authenticator.scope_of: every token is compared, no early exit.
            if hmac.compare_digest(wanted, _digest(token.secret)) and found is None:
                found = token.scope
        return found

    def viewer(self, request: Request) -> Viewer | None:
        if self.open:
            return Viewer(ADMIN, self._csrf("open"), "open")
        presented = presented_token(request)
        if presented:
            scope = self.auth.scope_of(presented)
            if scope is None:
                return None
            bound = _digest(presented.encode("latin-1", "replace")).hex()
            return Viewer(scope, self._csrf("bearer\0" + bound), "bearer")
        raw = request.cookies.get(COOKIE)
        if not raw:
            return None
        try:
            data = self._signer.loads(raw, max_age=MAX_AGE_SECONDS)
        except BadSignature:
            return None
        if not isinstance(data, dict) or not isinstance(data.get("n"), str):
            return None
        scope = self._scope_of_digest(data.get("t"))
        if scope is None:
            return None
        return Viewer(scope, self._csrf("cookie\0" + data["n"]), "cookie")


def secure_request(request: Request) -> bool:
    """Whether the browser reached us over https (directly or through a proxy that says so);
    the cookie is then marked Secure."""
    forwarded = request.headers.get("x-forwarded-proto", "").split(",")[0].strip().lower()
    return request.url.scheme == "https" or forwarded == "https"


def same_origin(request: Request) -> bool:
    """A form post's Origin, when the browser sends one, must name this host (or an origin
    of JOBFENCE_API_ALLOWED_ORIGINS): a page of another site cannot post here even with a
    stolen CSRF token. Browsers send Origin on every POST; a client that sends none is
    judged by the CSRF token alone."""
    return origin_allowed(request)


def csrf_ok(viewer: Viewer, presented: str | None) -> bool:
    return bool(presented) and hmac.compare_digest(presented.encode(), viewer.csrf.encode())
