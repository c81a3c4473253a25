"""Which ``Host`` and ``Origin`` a request may carry (docs/security.md, "Browsers").

A web page can make a visitor's browser send requests to an API on the visitor's own
machine: a page of evil.example whose name it re-points at 127.0.0.1 (DNS rebinding) is
answered unless the ``Host`` it sends is refused, and a form or ``fetch`` it posts changes
state unless its foreign ``Origin`` is. Tokens do not help ``--no-auth``, which is what
``jobfence run`` serves on a laptop.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from urllib.parse import urlsplit

from .problems import problem

HOSTS_ENV = "JOBFENCE_API_ALLOWED_HOSTS"
ORIGINS_ENV = "JOBFENCE_API_ALLOWED_ORIGINS"
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]")
ANY = "*"
# Addresses that name no host a client could put in Host.
WILDCARDS = frozenset({"0.0.0.0", "[::]"})


class HostConfigError(ValueError):
    """An entry of the allowed hosts or origins cannot be read."""


def _bracketed(name: str) -> str:
    # An IPv6 literal is written [::1] in Host; accept it configured either way.
    bare = name[1:-1] if name.startswith("[") and name.endswith("]") else name
    try:
        if ipaddress.ip_address(bare).version == 6:
            return f"[{ipaddress.ip_address(bare).compressed}]"
    except ValueError:
        pass
    return name


def normal_host(name: str) -> str:
    """A host name as compared: lower case, IPv6 in brackets, no trailing dot (``localhost.``
    names the same host)."""
    name = name.strip().lower()
    if name.endswith(".") and not name.startswith("["):
        name = name[:-1]
    return _bracketed(name)


def host_entry(raw: str, where: str) -> str:
    entry = raw.strip().lower()
    if entry == ANY:
        return ANY
    suffix = entry.startswith(".")
    name = normal_host(entry[1:] if suffix else entry)
    # One colon outside brackets is a port: an entry allows every port of its host.
    if not name or (":" in name and not name.startswith("[")) or any(
            c in name for c in "/@?#* \t"):
        raise HostConfigError(f"{where}: {raw.strip()[:100]!r} is not a host name (give the "
                              "name or address without scheme or port, .example.com for a "
                              f"domain and its subdomains, or {ANY} for any host)")
    return "." + name if suffix else name


def origin_entry(raw: str, where: str) -> str:
    entry = raw.strip().lower().rstrip("/")
    parts = urlsplit(entry)
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.path or \
            parts.query or parts.fragment or "@" in parts.netloc:
        raise HostConfigError(f"{where}: {raw.strip()[:100]!r} is not an origin (give "
                              "scheme://host[:port], e.g. https://jobs.example.com)")
    return f"{parts.scheme}://{parts.netloc}"


def split_host_header(value: str) -> str | None:
    """The name of a ``Host`` header's ``name[:port]``; None when it is not one."""
    value = value.strip()
    if value.startswith("["):
        end = value.find("]")
        if end < 0 or (value[end + 1:] and not value[end + 1:].startswith(":")):
            return None
        name, port = value[:end + 1], value[end + 2:]
    else:
        name, _, port = value.partition(":")
    if port and not port.isdigit():
        return None
    return normal_host(name) if name else None


@dataclass(frozen=True)
class HostPolicy:
    """The allowed ``Host`` names (any port) and the origins, besides a request's own, that
    may change state."""

    hosts: tuple[str, ...] = LOOPBACK_NAMES
    origins: tuple[str, ...] = ()

    @property
    def any_host(self) -> bool:
        return ANY in self.hosts

    def allows_host(self, header: str | None) -> bool:
        if self.any_host:
            return True
        name = split_host_header(header) if header else None
        if name is None:
            return False
        for entry in self.hosts:
            if entry.startswith("."):
                if name == entry[1:] or name.endswith(entry):
                    return True
            elif name == entry:
                return True
        return False

    def allows_origin(self, origin: str | None, host: str | None) -> bool:
        """No ``Origin``: not a browser's cross-site request (browsers send one on every
        POST, PUT, PATCH and DELETE). ``null`` (a sandboxed frame, a file) is foreign. The
        scheme is not compared with the request's own: behind a TLS proxy this process sees
        http where the browser says https, and one port cannot serve both."""
        if origin is None:
            return True
        origin = origin.strip().lower()
        parts = urlsplit(origin)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            return False
        if host and parts.netloc == host.strip().lower():
            return True
        return f"{parts.scheme}://{parts.netloc}" in self.origins


def build_policy(bound_host: str | None, hosts_env: str | None, hosts_flag=(),
                 origins_env: str | None = None, origins_flag=()) -> HostPolicy:
    """Loopback names, the address the server was bound to (unless a wildcard), then the
    configured names; raises HostConfigError naming the entry it cannot read."""
    hosts = list(LOOPBACK_NAMES)
    if bound_host:
        bound = normal_host(bound_host)
        if bound not in WILDCARDS and bound not in hosts:
            hosts.append(bound)
    given = [(e, f"{HOSTS_ENV} entry {i + 1}") for i, e in
             enumerate((hosts_env or "").split(",")) if e.strip()]
    given += [(e, f"--allowed-host {e.strip()[:100]!r}") for e in hosts_flag if e.strip()]
    for raw, where in given:
        entry = host_entry(raw, where)
        if entry not in hosts:
            hosts.append(entry)
    origins = []
    given = [(e, f"{ORIGINS_ENV} entry {i + 1}") for i, e in
             enumerate((origins_env or "").split(",")) if e.strip()]
    given += [(e, f"--allowed-origin {e.strip()[:100]!r}") for e in origins_flag if e.strip()]
    for raw, where in given:
        entry = origin_entry(raw, where)
        if entry not in origins:
            origins.append(entry)
    return HostPolicy(tuple(hosts), tuple(origins))


def _header(scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key == name:
            return value.decode("latin-1")
    return None


class HostGuard:
    """Refuse a request whose ``Host`` is not allowed, on every path (the dashboard's too),
    before anything else reads it: a DNS-rebound page must get no answer but this one."""

    def __init__(self, app, policy: HostPolicy):
        self.app = app
        self.policy = policy

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or self.policy.allows_host(_header(scope, b"host")):
            return await self.app(scope, receive, send)
        given = _header(scope, b"host")
        shown = repr(given[:100]) if given is not None else "none"
        response = problem(
            421, "host_not_allowed",
            f"Host {shown} is not one this server answers to; list it in {HOSTS_ENV} "
            f"(comma-separated) or with --allowed-host",
            headers={"Connection": "close"},
            errors=[{"location": "header.Host", "message": "not an allowed host"}])
        await response(scope, receive, send)


def origin_allowed(request) -> bool:
    """Whether a state-changing request's ``Origin`` is the server's own (the ``Host`` it
    was sent to) or a configured one. Shared by the API routes and the dashboard's forms."""
    policy: HostPolicy = getattr(request.app.state, "host_policy", None) or HostPolicy()
    return policy.allows_origin(request.headers.get("origin"), request.headers.get("host"))
