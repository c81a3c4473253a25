"""What every ``jobfence`` command shares: exit codes, error mapping, parameter types and
output. docs/cli.md documents each exit code; ``map_errors`` is the one place that maps
exceptions to them."""

from __future__ import annotations

import importlib
import json
import logging
import os
import sys
from datetime import datetime, timedelta, timezone
from typing import Any
from urllib.parse import urlsplit

import click
import psycopg
import redis

from .. import log as jlog
from .. import redact
from ..errors import (IllegalTransition, InvalidParameter, JobfenceError, JobNotFound,
                     PayloadTooLarge, UnknownKind)
from ..transport import MAX_JOB_ID

DEFAULT_DATABASE_URL = "postgresql://127.0.0.1:5432/jobfence"
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"

# Exit codes (documented in docs/cli.md).
EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2

# What each optional part of the package needs (pyproject.toml's extras): a command whose
# extra is not installed says so in one line, exit 2, instead of an ImportError traceback.
EXTRAS = {"api": ("fastapi", "uvicorn", "jinja2", "multipart", "itsdangerous"),
          "top": ("textual",)}


def require_extra(extra: str, command: str) -> None:
    for module in EXTRAS[extra]:
        try:
            importlib.import_module(module)
        except ImportError:
            raise Fail(f"jobfence {command} needs the [{extra}] extra ({module} is not "
                       f"installed): pip install 'jobfence[{extra}]'", EXIT_USAGE) from None
EXIT_NOT_FOUND = 3
EXIT_REFUSED = 4
EXIT_INVALID = 5
EXIT_UNAVAILABLE = 6
EXIT_SQITCH = 7
EXIT_TIMEOUT = 8
EXIT_JOB_FAILED = 9


class Fail(click.ClickException):
    def __init__(self, message: str, code: int):
        # Every error a command prints passes here; libpq and redis-py quote pieces of a
        # malformed URL, password included.
        super().__init__(redact.text(message))
        self.exit_code = code


# The per-process connection URLs (docs/cli.md, "Connection URLs"): each long-running
# process may log in as its own role; unset, it uses --database-url.
ROLE_DATABASE_URL_ENV = {role: f"JOBFENCE_{role.upper()}_DATABASE_URL"
                         for role in ("worker", "reaper", "relay", "api")}
# The API's second login, for admin-scoped requests (api/logins.py); no fallback.
API_ADMIN_DATABASE_URL_ENV = "JOBFENCE_API_ADMIN_DATABASE_URL"
API_ADMIN_LOGIN_ENV = (API_ADMIN_DATABASE_URL_ENV, "JOBFENCE_API_ADMIN_DATABASE_PASSWORD")


def cfg(ctx: click.Context) -> dict:
    root = ctx.find_root()
    conf = root.obj
    if not conf.get("_redacting"):
        conf["_redacting"] = True
        jlog.redact_last_resort()
        redact.register(conf.get("database_url"), conf.get("redis_url"),
                        *(os.environ.get(v) for v in ROLE_DATABASE_URL_ENV.values()),
                        os.environ.get(API_ADMIN_DATABASE_URL_ENV))
    return conf


def database_url_for(ctx: click.Context, role: str) -> str:
    """The URL process ``role`` logs in with: --database-url given on the command line,
    else JOBFENCE_<ROLE>_DATABASE_URL, else JOBFENCE_DATABASE_URL, else the default."""
    conf = cfg(ctx)
    root = ctx.find_root()
    if root.get_parameter_source("database_url") == click.core.ParameterSource.COMMANDLINE:
        url = conf["database_url"]
    else:
        url = os.environ.get(ROLE_DATABASE_URL_ENV[role], "").strip() or conf["database_url"]
    return checked_database_url(url)


def read_database_url_for(ctx: click.Context, fallback: bool = True) -> str | None:
    """Where observation reads (stats, top, the exporters): --read-database-url /
    JOBFENCE_READ_DATABASE_URL, e.g. a hot standby, so looking never loads the primary;
    unset, the database URL (None with ``fallback=False``). docs/scaling.md, "Observing
    from a replica"."""
    read = cfg(ctx).get("read_database_url")
    if read:
        return checked_database_url(read)
    return checked_database_url(cfg(ctx)["database_url"]) if fallback else None


def redis_url_for(ctx: click.Context) -> str:
    """The Redis URL, if redis-py can parse it; a malformed one is a usage error (exit 2)
    before a long-running process starts, never a traceback from inside it."""
    return checked_redis_url(cfg(ctx)["redis_url"])


def checked_redis_url(url: str) -> str:
    """redis-py parses lazily and forgives: a port out of range fails only at the first
    command, and a database that is not a number silently means 0."""
    from .. import redis_urls

    try:
        target = redis_urls.parse(url)
    except ValueError as exc:
        raise Fail(f"invalid Redis URL: {exc}", EXIT_USAGE) from None
    if target.kind != "plain":
        return url
    try:
        parsed = redis.connection.parse_url(url)
        parts = urlsplit(url)
        port = parts.port  # ValueError when out of range or not a number
        db = parts.path.lstrip("/")
    except ValueError as exc:
        raise Fail(f"invalid Redis URL: {exc}", EXIT_USAGE) from None
    if port == 0 or (parts.scheme != "unix" and db and not db.isdigit()):
        raise Fail(f"invalid Redis URL: {'port 0' if port == 0 else f'database {db!r} is not a number'}",
                   EXIT_USAGE)
    del parsed
    return url


def checked_database_url(url: str) -> str:
    """``url`` if libpq can parse it; a malformed one is a usage error (exit 2) at once, not
    a connection retried until it is called "unavailable"."""
    from ..db import InvalidDatabaseUrl, check_database_url

    try:
        check_database_url(url)
    except InvalidDatabaseUrl as exc:
        raise Fail(str(exc), EXIT_USAGE) from None
    return url


def json_default(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, timedelta):
        return value.total_seconds()
    return str(value)


_json_printed = False


def json_out(data: Any) -> None:
    global _json_printed
    _json_printed = True
    click.echo(json.dumps(data, default=json_default))


def utf8_text(value: str | None, what: str) -> str | None:
    """``value`` if it can be sent as UTF-8. Command-line bytes that are not UTF-8 arrive as
    lone surrogates (Python decodes argv with surrogateescape), which no driver can send."""
    if value is None:
        return None
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise Fail(f"invalid {what}: {_not_utf8(value, exc)}", EXIT_USAGE) from None
    return value


def _not_utf8(value: str, exc: UnicodeEncodeError) -> str:
    bad = value[exc.start:exc.end]
    try:
        shown = "".join(f"\\x{b:02x}" for b in bad.encode("utf-8", "surrogateescape"))
    except UnicodeEncodeError:
        shown = bad.encode("unicode_escape").decode("ascii")
    return f"not valid UTF-8 ({shown} at character {exc.start + 1})"


def tag(exc: JobfenceError) -> str:
    return f"{exc} [{exc.sqlstate} {exc.name}]" if exc.sqlstate else str(exc)


def server_error(exc: psycopg.Error) -> str:
    """A server error's message, HINT and [SQLSTATE name], without the traceback: the name
    is PostgreSQL's condition name, as the registry's codes print theirs (a code PostgreSQL
    does not define, an application's own, prints alone)."""
    from ..sqlstates import condition_name

    diag = exc.diag
    text = diag.message_primary or (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    if diag.message_detail:
        text += f" ({diag.message_detail})"
    if diag.message_hint:
        text += f" (HINT: {diag.message_hint})"
    if exc.sqlstate:
        name = condition_name(exc.sqlstate)
        text += f" [{exc.sqlstate} {name}]" if name else f" [{exc.sqlstate}]"
    return text


def map_errors(fn):
    """Map library errors to documented exit codes, one place for every command. With
    ``--json`` the error is also printed on stdout as ``{"error": {...}}``, so a script that
    reads stdout learns why it is empty."""
    import functools

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except Fail as failure:
            # A command's own refusal; unless it already printed its answer (a --wait that
            # timed out prints the row it has), stdout says why too.
            if kwargs.get("as_json") and not _json_printed:
                json_out({"error": {"message": failure.message, "exit_code": failure.exit_code,
                                    "sqlstate": None}})
            raise
        except Exception as exc:  # noqa: BLE001 - mapped below, or re-raised untouched
            failure = _failure_of(exc)
            if failure is None:
                raise
            if kwargs.get("as_json"):
                json_out({"error": {"message": failure.message, "exit_code": failure.exit_code,
                                    "sqlstate": getattr(exc, "sqlstate", None)}})
            raise failure from None
    return wrapper


# The schema is missing (3F000, or 42P01 on a jobs relation) or older than this driver (42883
# on a jobs function): say what to run instead of a bare server message.
DEPLOY_HINT = "; deploy the schema with `jobfence db deploy` (docs/cli.md)"


def _failure_of(exc: Exception) -> "Fail | None":
    from ..db import InvalidDatabaseUrl

    if isinstance(exc, InvalidDatabaseUrl):
        return Fail(str(exc), EXIT_USAGE)
    if isinstance(exc, JobNotFound):
        return Fail(f"not found: {tag(exc)}", EXIT_NOT_FOUND)
    if isinstance(exc, IllegalTransition):
        return Fail(f"refused: {tag(exc)}", EXIT_REFUSED)
    if isinstance(exc, (InvalidParameter, PayloadTooLarge, UnknownKind)):
        return Fail(f"invalid: {tag(exc)}", EXIT_INVALID)
    if isinstance(exc, JobfenceError):
        return Fail(tag(exc), EXIT_ERROR)
    if isinstance(exc, psycopg.OperationalError):
        # libpq's message spans lines ("... refused\n\tIs the server running ..."): one line.
        return Fail("PostgreSQL unavailable: " + " ".join(str(exc).split()), EXIT_UNAVAILABLE)
    if isinstance(exc, psycopg.DataError):
        # SQLSTATE class 22 (data exception): the input cannot be stored or computed,
        # e.g. 22P05 for a \u0000 the server cannot convert, 22008 for a date overflow.
        return Fail(f"invalid: {server_error(exc)}", EXIT_INVALID)
    if isinstance(exc, psycopg.errors.InvalidSchemaName) or (
            isinstance(exc, (psycopg.errors.UndefinedFunction, psycopg.errors.UndefinedTable))
            and "jobs." in str(exc)):
        return Fail(f"database error: {server_error(exc)}{DEPLOY_HINT}", EXIT_ERROR)
    if isinstance(exc, psycopg.Error):
        return Fail(f"database error: {server_error(exc)}", EXIT_ERROR)
    if isinstance(exc, redis.ConnectionError):
        return Fail(f"Redis unavailable: {exc}", EXIT_UNAVAILABLE)
    if isinstance(exc, UnicodeEncodeError):
        # Text from the command line the driver cannot encode (see utf8_text).
        return Fail(f"invalid argument: {_not_utf8(exc.object, exc)}", EXIT_USAGE)
    if isinstance(exc, ValueError):
        # redis-py refuses a malformed URL with ValueError ("Port could not be cast...").
        text = str(exc).lower()
        if "url" in text or "port could not be cast" in text:
            return Fail(f"invalid URL: {exc}", EXIT_USAGE)
    return None


class JobId(click.ParamType):
    """A job id: a positive 64-bit integer (PostgreSQL bigint identity)."""

    name = "ID"
    MAX = MAX_JOB_ID

    def convert(self, value, param, ctx):
        if isinstance(value, int) and not isinstance(value, bool):
            number = value
        else:
            text = str(value).strip()
            if text.startswith("--"):
                self.fail(f"no such option: {text}", param, ctx)
            try:
                number = int(text, 10)
            except ValueError:
                self.fail(f"{text!r} is not a job id: ids are positive 64-bit integers "
                          f"(1..{self.MAX})", param, ctx)
        if not 1 <= number <= self.MAX:
            self.fail(f"{value} is not a job id: ids are positive 64-bit integers "
                      f"(1..{self.MAX})", param, ctx)
        return number


JOB_ID = JobId()
# "-1" must reach JobId (and be refused as an id) rather than be parsed as an option.
ID_COMMAND = {"ignore_unknown_options": True}


class Seconds(click.ParamType):
    """A finite number of seconds (nan, inf and negative durations are refused)."""

    name = "SECONDS"

    def __init__(self, positive: bool = False):
        self.positive = positive

    def convert(self, value, param, ctx):
        try:
            number = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number of seconds", param, ctx)
        if number != number or number < 0 or number > 10 * 365 * 86400 \
                or (self.positive and number == 0):
            self.fail(f"{value!r} must be a finite number of seconds, "
                      f"{'above' if self.positive else 'at least'} 0 and at most 10 years",
                      param, ctx)
        return number


SECONDS = Seconds()
POSITIVE_SECONDS = Seconds(positive=True)


class WebhookUrl(click.ParamType):
    """An http(s) URL with a host: a typo is a usage error at start, not a failed page later."""

    name = "URL"

    def convert(self, value, param, ctx):
        from urllib.parse import urlsplit

        text = str(value)
        try:
            parts = urlsplit(text)
            port = parts.port  # raises for a port out of range or not a number
        except ValueError as exc:
            self.fail(f"{text!r} is not a valid URL: {exc}", param, ctx)
        if parts.scheme not in ("http", "https") or not parts.hostname or any(c.isspace() for c in text):
            self.fail(f"{text!r} is not an http:// or https:// URL with a host", param, ctx)
        if port == 0:
            self.fail(f"{text!r}: port 0 is not a port a webhook listens on", param, ctx)
        return text


WEBHOOK_URL = WebhookUrl()


def client_for(ctx: click.Context):
    from ..client import Client

    conf = cfg(ctx)
    # One line for a one-shot command: the pool's own warning at every retry would bury the
    # cause, which the final error names (Database.connection asks libpq once directly).
    logging.getLogger("psycopg.pool").setLevel(logging.ERROR)
    # A one-shot command should say "unavailable" quickly rather than wait out a pool.
    return Client(checked_database_url(conf["database_url"]), checked_redis_url(conf["redis_url"]),
                  timeout=3.0)


def app_from(app_ref: str, app_dir: str | None = ".", *, serving: bool = False):
    """The App that ``--app`` names; a mistake in it is a usage error (exit 2), one line. An
    App to serve (``serving``) must declare a task: a worker of none would idle forever."""
    from ..app import AppLoadError, load_app

    if app_dir is not None and not os.path.isdir(app_dir):
        raise Fail(f"--app-dir {app_dir}: no such directory", EXIT_USAGE)
    try:
        app = load_app(app_ref, app_dir)
    except AppLoadError as exc:
        raise Fail(str(exc), EXIT_USAGE) from None
    if serving and not app.tasks:
        raise Fail(f"--app {app_ref} declares no task: add one with @app.task(\"kind\") "
                   "(docs/python.md)", EXIT_USAGE)
    app.ref = app_ref
    return app


def require_schema(url: str) -> None:
    """Before a long-running process starts: a database without the schema (or with an
    older one) is a mistake to say once, with the command that fixes it, not a traceback
    or a restart loop. PostgreSQL away is not: the process waits for it and says why."""
    try:
        with psycopg.connect(url, connect_timeout=3, autocommit=True,
                             application_name="jobfence-schema-check") as conn:
            conn.execute("SELECT 1 FROM jobs.transitions() LIMIT 1")
    except (psycopg.errors.InvalidSchemaName, psycopg.errors.UndefinedFunction) as exc:
        raise Fail(f"database error: {server_error(exc)}{DEPLOY_HINT}", EXIT_ERROR) from None
    except psycopg.Error:
        return


def queues_from(app_ref: str | None, queues: tuple[str, ...]) -> list[str]:
    found = list(queues)
    if app_ref:
        found += app_from(app_ref).queues
    return sorted(set(found))


def exit_process(code: int) -> None:
    # Handler threads that ignored cancellation must not hold the exit hostage: the jobs
    # they held are handed back (or reaped) already.
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


json_option = click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")


def setup_logging(ctx: click.Context, role: str, **static) -> None:
    conf = cfg(ctx)
    jlog.setup(conf["log_format"], conf["log_level"], role=role, **static)



def job_dict(job) -> dict:
    return job.to_dict()


def fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, datetime):
        return value.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"
    if isinstance(value, (dict, list)):
        return json.dumps(value)
    return str(value)


def table(headers: list[str], rows: list[list[Any]]) -> str:
    cells = [[fmt(c) for c in r] for r in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    line = lambda r: "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip()  # noqa: E731
    return "\n".join([line(headers), line(["-" * w for w in widths])] + [line(r) for r in cells])

