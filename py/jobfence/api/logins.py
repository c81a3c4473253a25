"""The database logins the API serves its two scopes with (docs/http.md, "Database logins").

A producer-scoped request runs as the API's login (``JOBFENCE_API_DATABASE_URL``, e.g.
``jobfence_api``, a member of ``jobs_producer``). An admin-scoped request — every request under
``--no-auth`` — and the read-only views anyone signed in may see (``GET /queues``, the
dashboard's pages) run as the admin login: ``JOBFENCE_API_ADMIN_DATABASE_URL`` (e.g.
``jobfence_api_admin``, a member of ``jobs_admin``), or the API's login itself when it is a
member of ``jobs_admin``. Checked once at start: a scope no login can serve is one line and
exit 2, not a 500 per request.
"""

from __future__ import annotations

from dataclasses import dataclass

import psycopg

ADMIN_URL_ENV = "JOBFENCE_API_ADMIN_DATABASE_URL"

_FACTS = """
SELECT session_user::text,
       pg_has_role(session_user, 'jobs_producer', 'MEMBER') OR pg_has_role(session_user, 'jobs_admin', 'MEMBER'),
       pg_has_role(session_user, 'jobs_admin', 'MEMBER')
"""


@dataclass(frozen=True)
class Login:
    role: str
    can_produce: bool
    can_admin: bool


def login_of(url: str) -> Login:
    with psycopg.connect(url, connect_timeout=10, autocommit=True) as conn:
        role, produce, admin = conn.execute(_FACTS).fetchone()
    return Login(role, bool(produce), bool(admin))


def refusal(api: Login, admin: Login | None, needs_admin: bool) -> str | None:
    """Why the API cannot serve what it was asked to, as the one line to print; None when
    it can. ``admin``: the login of JOBFENCE_API_ADMIN_DATABASE_URL, when set."""
    if not api.can_produce:
        return (f"the API's database login {api.role} is in neither jobs_producer nor jobs_admin: "
                f"it cannot submit or read jobs (GRANT jobs_producer TO {api.role}; scripts/roles.sql "
                "creates jobfence_api)")
    if admin is not None and not admin.can_admin:
        return (f"{ADMIN_URL_ENV} logs in as {admin.role}, which is not in jobs_admin "
                f"(GRANT jobs_admin TO {admin.role}; scripts/roles.sql creates jobfence_api_admin)")
    if needs_admin and admin is None and not api.can_admin:
        return (f"the admin scope (--no-auth, or an admin token) needs a database login in "
                f"jobs_admin, and {api.role} is not one: set {ADMIN_URL_ENV} (scripts/roles.sql "
                "creates jobfence_api_admin), or serve producer tokens only")
    return None
