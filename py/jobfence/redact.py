"""Passwords never leave a process in what it prints: log lines, CLI errors, tracebacks.

Two passes over any text about to be printed: URL user-info (``scheme://user:SECRET@``)
and libpq's ``password=SECRET`` keywords are masked wherever they appear, and so is every
password of the URLs this process was given (``register``), literally and percent-decoded:
libpq and redis-py quote pieces of a malformed URL in their errors (``invalid
percent-encoded token: "..."``, ``missing "=" after "..."``) where no pattern can tell the
password from the rest. Literal masking skips passwords shorter than ``MIN_LITERAL``, which
would mask innocent text; the patterns still cover those.
"""

from __future__ import annotations

import re
import sys
import threading
from urllib.parse import unquote

MASK = "***"
MIN_LITERAL = 4

# user-info of a URL: the ``//`` opens it even in a URL whose scheme lost its colon.
_USERINFO = re.compile(r"(//[^:/@\s\"'?#]*):([^@\s\"'/]*)@")
_KEYWORD = re.compile(r"(?i)\b((?:ssl)?password\s*=\s*)('(?:[^'\\]|\\.)*'|[^\s\"']+)")

_secrets: set[str] = set()
_lock = threading.Lock()
_hooked = False


def _passwords(url: str) -> set[str]:
    found = {m.group(2) for m in _USERINFO.finditer(url)}
    found |= {m.group(2).strip("'") for m in _KEYWORD.finditer(url)}
    found |= {unquote(p) for p in found}
    return {p for p in found if len(p) >= MIN_LITERAL}


def register(*urls: str | None) -> None:
    """Mask the passwords of these URLs (connection strings too) in everything
    ``text`` redacts from now on, and in uncaught tracebacks (main thread and others)."""
    global _hooked
    with _lock:
        for url in urls:
            if url:
                _secrets.update(_passwords(str(url)))
        if not _hooked:
            _hooked = True
            _hook_excepthook()


def text(value: object) -> str:
    """``value`` as text with every password masked."""
    out = str(value)
    if "@" in out:
        out = _USERINFO.sub(rf"\1:{MASK}@", out)
    if "=" in out:
        out = _KEYWORD.sub(rf"\1{MASK}", out)
    for secret in sorted(_secrets, key=len, reverse=True):
        if secret in out:
            out = out.replace(secret, MASK)
    return out


def url(value: str | None) -> str | None:
    """A URL fit to show: its password masked, everything else kept."""
    return None if value is None else text(value)


def _hook_excepthook() -> None:
    previous = sys.excepthook

    def redacting(exc_type, exc, tb):
        import traceback

        sys.stderr.write(text("".join(traceback.format_exception(exc_type, exc, tb))))
        sys.stderr.flush()

    redacting.previous = previous  # type: ignore[attr-defined]
    sys.excepthook = redacting

    def redacting_thread(args):
        import traceback

        name = getattr(args.thread, "name", "?")
        sys.stderr.write(text(f"Exception in thread {name}:\n" + "".join(
            traceback.format_exception(args.exc_type, args.exc_value, args.exc_traceback))))
        sys.stderr.flush()

    threading.excepthook = redacting_thread
