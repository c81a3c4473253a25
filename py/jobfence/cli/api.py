"""``jobfence api``: the HTTP API (docs/http.md) on uvicorn."""

from __future__ import annotations

import errno
import ipaddress
import logging
import os
import socket

import click

from .common import (API_ADMIN_DATABASE_URL_ENV, API_ADMIN_LOGIN_ENV, EXIT_USAGE, Fail, checked_database_url,
                     database_url_for, exit_process, read_database_url_for, redis_url_for,
                     require_extra, require_schema, setup_logging)

TOKENS_ENV = "JOBFENCE_API_TOKENS"
ADMIN_PASSWORD_ENV = API_ADMIN_LOGIN_ENV[1]
# As jobfence.api.hosts names them; that package imports FastAPI, which other commands
# need not load.
HOSTS_ENV = "JOBFENCE_API_ALLOWED_HOSTS"
ORIGINS_ENV = "JOBFENCE_API_ALLOWED_ORIGINS"


def api_tokens():
    """The tokens of JOBFENCE_API_TOKENS; a usage error (exit 2, one line without the token)
    when one cannot be read or is too short. `jobfence run` asks too, before its children."""
    from ..api.auth import TokenError, parse_tokens

    try:
        return parse_tokens(os.environ.get(TOKENS_ENV))
    except TokenError as exc:
        raise Fail(str(exc), EXIT_USAGE) from None


def host_policy(host: str, allowed_hosts=(), allowed_origins=(), no_auth: bool = False):
    """The Host allow-list and the allowed origins; a usage error when an entry cannot be
    read, or when any Host would be answered without tokens."""
    from ..api.hosts import HostConfigError, build_policy

    try:
        policy = build_policy(host, os.environ.get(HOSTS_ENV), allowed_hosts,
                              os.environ.get(ORIGINS_ENV), allowed_origins)
    except HostConfigError as exc:
        raise Fail(str(exc), EXIT_USAGE) from None
    if policy.any_host and no_auth:
        # Any Host lets a DNS-rebound page pass the same-origin check too.
        raise Fail(f"--no-auth with {HOSTS_ENV} or --allowed-host '*': any web page could "
                   "reach this open API through DNS rebinding; list the host names, or set "
                   "tokens", EXIT_USAGE)
    return policy


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def normal_wildcard(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.strip("[]")).is_unspecified
    except ValueError:
        return False


def _listen(host: str, port: int) -> socket.socket:
    """Bind before anything else, so a port in use ends the command with one line (exit 2)
    and --port 0 can log the port it got."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        reason = {errno.EADDRINUSE: "address already in use (another process listens there)",
                  errno.EACCES: "permission denied (ports below 1024 need privileges)"}.get(
            exc.errno, exc.strerror or str(exc))
        raise Fail(f"cannot listen for HTTP on {host}:{port}: {reason}", EXIT_USAGE) from None
    sock.set_inheritable(True)
    return sock


def _admin_url() -> str | None:
    """JOBFENCE_API_ADMIN_DATABASE_URL, with JOBFENCE_API_ADMIN_DATABASE_PASSWORD when set:
    PGPASSWORD is the API login's, and a password kept out of the URL stays out of
    ``docker inspect`` and of logs."""
    from psycopg.conninfo import make_conninfo

    from .. import redact

    url = os.environ.get(API_ADMIN_DATABASE_URL_ENV, "").strip()
    if not url:
        return None
    url = checked_database_url(url)
    password = os.environ.get(ADMIN_PASSWORD_ENV)
    if password:
        url = make_conninfo(url, password=password)
        redact.register(url)
    return url


def _check_logins(api_url: str, admin_url: str | None, needs_admin: bool) -> None:
    """A scope no database login can serve is refused now, in one line (api/logins.py)."""
    import psycopg

    from ..api.logins import login_of, refusal

    try:
        api_login = login_of(api_url)
        admin_login = login_of(admin_url) if admin_url else None
    except psycopg.OperationalError:
        return  # PostgreSQL away: the API starts and answers 503 until it is back
    why = refusal(api_login, admin_login, needs_admin)
    if why:
        raise Fail(why, EXIT_USAGE)


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to listen on (0.0.0.0 for every interface).")
@click.option("--port", default=8000, show_default=True, type=click.IntRange(0, 65535),
              help="Port to listen on (0: any free port, logged in api_listening).")
@click.option("--no-auth", is_flag=True,
              help=f"Serve without tokens (every request is admin) when {TOKENS_ENV} is "
                   "unset; for 127.0.0.1 only.")
@click.option("--max-body-bytes", default=None, type=click.IntRange(1024, 64 * 1024 * 1024),
              help="Refuse request bodies over this size with 413 [default: 1.5 MiB].")
@click.option("--pool-size", default=10, show_default=True, type=click.IntRange(1, 200),
              help="PostgreSQL connections of the API (long polls hold none).")
@click.option("--allowed-host", "allowed_hosts", multiple=True, metavar="NAME",
              help=f"Also answer requests whose Host is NAME (any port; .example.com: the "
                   f"domain and its subdomains; *: any). Repeatable; adds to {HOSTS_ENV}. "
                   "Loopback names and the --host address are always answered.")
@click.option("--allowed-origin", "allowed_origins", multiple=True, metavar="ORIGIN",
              help=f"Also accept POST/PUT/DELETE from pages of ORIGIN (scheme://host[:port]). "
                   f"Repeatable; adds to {ORIGINS_ENV}.")
@click.option("--header-timeout", default=None, type=click.FloatRange(0.1, 3600),
              help="Seconds a request's headers may take to arrive (408, connection closed) "
                   "[default: 10].")
@click.option("--body-timeout", default=None, type=click.FloatRange(0.1, 3600),
              help="Seconds a request body may take to arrive after its headers (408) "
                   "[default: 30].")
@click.option("--limit-concurrency", default=None, type=click.IntRange(1, 1_000_000),
              help="Answer 503 once this many connections are open [default: no limit].")
@click.option("--print-openapi", is_flag=True,
              help="Print the OpenAPI document on stdout and exit (docs/openapi.json).")
@click.pass_context
def api(ctx, host, port, no_auth, max_body_bytes, pool_size, allowed_hosts, allowed_origins,
        header_timeout, body_timeout, limit_concurrency, print_openapi):
    """The HTTP API: submit (202 Accepted), follow, cancel and replay jobs.

    Tokens come from JOBFENCE_API_TOKENS: comma-separated TOKEN[:SCOPE], SCOPE being
    producer (the default: submit, read, cancel) or admin (also replay and /metrics);
    each token at least 16 characters.
    """
    require_extra("api", "api")
    from ..api import Settings, openapi_text
    from ..api.app import DEFAULT_BODY_TIMEOUT, DEFAULT_MAX_BODY_BYTES
    from ..api.hosts import LOOPBACK_NAMES
    from ..api.serve import DEFAULT_HEADER_TIMEOUT, server_config
    from ..web import create_app

    if print_openapi:
        click.echo(openapi_text(), nl=False)
        return
    tokens = api_tokens()
    if tokens and no_auth:
        raise Fail(f"--no-auth and {TOKENS_ENV} both given: unset one", EXIT_USAGE)
    if not tokens and not no_auth:
        raise Fail(f"no API tokens: set {TOKENS_ENV}=TOKEN[:producer|admin],... or pass "
                   "--no-auth (meant for 127.0.0.1 only)", EXIT_USAGE)
    policy = host_policy(host, allowed_hosts, allowed_origins, no_auth)
    api_url = database_url_for(ctx, "api")
    admin_url = _admin_url()
    require_schema(api_url)
    _check_logins(api_url, admin_url, needs_admin=no_auth or any(t.scope == "admin" for t in tokens))
    setup_logging(ctx, "api")
    from .. import log as jlog
    from ..api.problems import logger

    if no_auth:
        jlog.event(logger, logging.WARNING, "auth_disabled",
                   "serving without authentication (--no-auth): every request holds the "
                   "admin scope; listen on 127.0.0.1 only", host=host,
                   loopback=is_loopback(host))
    if normal_wildcard(host) and len(policy.hosts) == len(LOOPBACK_NAMES):
        jlog.event(logger, logging.WARNING, "hosts_loopback_only",
                   f"listening on every interface, but only loopback Host names are "
                   f"answered (421 otherwise): list the names clients use in {HOSTS_ENV}",
                   host=host)
    sock = _listen(host, port)
    bound = sock.getsockname()[1]

    def ready():
        jlog.event(logger, logging.INFO, "api_listening", "HTTP API ready", host=host,
                   port=bound, auth="off" if no_auth else "tokens",
                   tokens=len(tokens) if tokens else 0,
                   allowed_hosts=",".join(policy.hosts))

    import uvicorn

    app = create_app(Settings(database_url=api_url, redis_url=redis_url_for(ctx),
                              read_database_url=read_database_url_for(ctx, fallback=False),
                              admin_database_url=admin_url,
                              tokens=None if no_auth else tokens, pool_size=pool_size,
                              max_body_bytes=max_body_bytes or DEFAULT_MAX_BODY_BYTES,
                              body_timeout=body_timeout or DEFAULT_BODY_TIMEOUT,
                              host_policy=policy, on_ready=ready))
    server = uvicorn.Server(server_config(app,
                                          header_timeout=header_timeout or DEFAULT_HEADER_TIMEOUT,
                                          limit_concurrency=limit_concurrency))
    server.run(sockets=[sock])
    jlog.event(logger, logging.INFO, "api_stopped", "HTTP API stopped")
    exit_process(0)
