"""PostgreSQL access: an autocommit pool and one method per SQL API call.

Each method is one statement from ``jobfence.sql`` in its own transaction (autocommit), so a
worker never idles in a transaction while a handler runs. Server errors of the registry come
back as ``jobfence.errors`` exceptions; connection failures stay ``psycopg.OperationalError``
so the processes can back off and retry.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from datetime import datetime, timedelta
from typing import Any, Iterable, Iterator, Sequence

import psycopg
from psycopg.rows import dict_row, tuple_row
from psycopg.types.json import Jsonb
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import AsyncConnectionPool, ConnectionPool, PoolTimeout

from . import log as jlog
from . import arrays, rows, sql
from .jsonload import tolerate
from .errors import InvalidParameter, translate
from .names import NAME, name_hint
from .tracing import current_traceparent


logger = logging.getLogger("jobfence.db")


def _seconds(value: float | timedelta | None) -> timedelta | None:
    if value is None or isinstance(value, timedelta):
        return value
    return timedelta(seconds=float(value))


def interval_text(value: float | timedelta | str | None) -> str | None:
    """A period as PostgreSQL reads an interval: seconds (a number or a timedelta) or the
    text itself ("1 hour")."""
    if value is None or isinstance(value, str):
        return value
    seconds = value.total_seconds() if isinstance(value, timedelta) else float(value)
    return f"{seconds!r} seconds"


# PostgreSQL reads a zone offset of whole seconds within +-15:59:59, where Python's datetime
# allows +-23:59:59.999999. A batch's run_after travels as text, which jobs.insert_jobs then
# refuses (22023); a single submit's travels in binary, offset already applied, and the
# server would take it. Refused here before any SQL, so one value gets one answer everywhere.
_ZONE_OFFSET_LIMIT = timedelta(hours=16)
RUN_AFTER_HINT = 'Use ISO 8601 with a zone offset within +-15:59, e.g. "2030-01-01T09:00:00Z".'


def unreadable_offset(when: datetime) -> str | None:
    """Why PostgreSQL cannot read ``when``'s zone offset as text, or None when it can."""
    offset = when.utcoffset()
    if offset is None:
        return None
    if abs(offset) >= _ZONE_OFFSET_LIMIT:
        return "its zone offset is beyond +-15:59"
    if offset % timedelta(seconds=1):
        return "its zone offset is not a whole number of seconds"
    return None


def checked_run_after(when: datetime | None) -> datetime | None:
    """``when``, or InvalidParameter (22023, as a batch's spec gets) for an offset
    PostgreSQL cannot read."""
    problem = None if when is None else unreadable_offset(when)
    if problem:
        raise InvalidParameter(f'run_after "{when.isoformat()}" is not a timestamp PostgreSQL '
                               f"can read: {problem}", hint=RUN_AFTER_HINT)
    return when


# jobs.replay_many's bound on error_like.
MAX_ERROR_LIKE_BYTES = 4096
LIKE_HINT = ("In a LIKE pattern a backslash escapes the character after it: write \\\\ for "
             "a literal backslash, \\% and \\_ for a literal % and _.")


def replay_filter_problem(kind: str | None, error_like: str | None) -> tuple[str, str, str] | None:
    """(parameter, message, hint) for a filter ``jobs.replay_many`` refuses (22023, before it
    reads a row), or None when both are well formed: the rule the SQL keeps, asked by the
    CLI and the HTTP API before a round trip, so they answer as for any bad option or field
    (exit 2; a 400 naming the field)."""
    if kind is not None and not NAME.fullmatch(kind):
        return "kind", f"kind {kind[:200]!r} is malformed", name_hint("Kind")
    if error_like is None:
        return None
    size = len(error_like.encode("utf-8", "surrogatepass"))
    if size > MAX_ERROR_LIKE_BYTES:
        return ("error_like", f"error_like is {size} bytes, over the limit of "
                f"{MAX_ERROR_LIKE_BYTES}", "Match a distinctive part of the error, e.g. '%timeout%'.")
    # Backslashes pair up from the left of a run: an odd run at the end leaves one escaping
    # nothing.
    if (len(error_like) - len(error_like.rstrip("\\"))) % 2:
        return ("error_like", "error_like ends with the escape character \\, which escapes "
                "nothing", LIKE_HINT)
    return None


def spec_options(unique_while: Sequence[str] | None = None,
                 unique_for: float | timedelta | str | None = None,
                 debounce: str | None = None, traceparent: str | None = None,
                 depends_on: Sequence[int | dict] | None = None,
                 on_dependency_failure: str | None = None,
                 concurrency_key: str | None = None, *,
                 current: bool = True) -> dict:
    """The newer arguments of ``jobs.submit`` as the statements of ``jobfence.sql`` take
    them: the scoped key (docs/sql-api.md, "Scoped keys and debounce") and the producer's
    trace context, the caller's current span unless given (docs/observability.md,
    "Tracing"), the jobs it waits for (docs/sql-api.md, "Dependencies") and the key its
    kind's max_running_per_key counts it by (docs/sql-api.md, "Per-key concurrency and fair
    claiming")."""
    return {"unique_while": None if unique_while is None else list(unique_while),
            "unique_for": interval_text(unique_for), "debounce": debounce,
            "traceparent": traceparent or (current_traceparent() if current else None),
            "depends_on": None if depends_on is None else list(depends_on),
            "on_dependency_failure": on_dependency_failure, "concurrency_key": concurrency_key}


def single_spec_options(**scope) -> dict:
    """``spec_options`` for one submit (``jobs.submit``), whose depends_on holds job ids only:
    a ``{"spec": n}`` names an earlier spec of the same batch, and one submit has none
    (InvalidParameter, 22023, as the batch refuses a position with no earlier spec)."""
    options = spec_options(**scope)
    if any(isinstance(d, dict) for d in options["depends_on"] or ()):
        raise InvalidParameter(
            "depends_on of a single submit must be job ids: {\"spec\": n} names an earlier spec "
            "of the same batch, and a single submit has none",
            hint="Submit the specs together (submit_many, POST /jobs/batch) to depend on one "
                 "of them before it has an id.")
    return options


def job_spec(kind: str, payload: Any = None, *, idempotency_key: str | None = None,
          run_after: datetime | None = None, ordering_key: str | None = None,
          notify: bool = False, priority: int | None = None,
          unique_while: Sequence[str] | None = None,
          unique_for: float | timedelta | str | None = None,
          debounce: str | None = None, traceparent: str | None = None,
          depends_on: Sequence[int | dict] | None = None,
          on_dependency_failure: str | None = None, concurrency_key: str | None = None) -> dict:
    spec: dict[str, Any] = {"kind": kind, "payload": {} if payload is None else payload,
                            "notify": notify}
    # The batch's callers look the current trace context up once (Client._normalised), not
    # once per spec.
    spec.update((k, v) for k, v in spec_options(unique_while, unique_for, debounce, traceparent,
                                                depends_on, on_dependency_failure, concurrency_key,
                                                current=False).items()
                if v is not None)
    if idempotency_key is not None:
        spec["idempotency_key"] = idempotency_key
    if run_after is not None:
        spec["run_after"] = run_after.isoformat()
    if ordering_key is not None:
        spec["ordering_key"] = ordering_key
    if priority is not None:
        spec["priority"] = priority
    return spec


# A restarted server leaves dead sockets in the pool, so a connection is tested before it
# is handed out, but only one that sat idle: testing costs a round trip, and the hot path
# takes a connection per batch. A socket that died within the last moment fails its call
# with OperationalError, which every caller already retries (and the pool then replaces it).
_CHECK_AFTER_IDLE_SECONDS = 1.0


def stamp_returned(conn) -> None:
    """Note when a pooled connection (sync or async) came back; see sat_idle."""
    conn._jobfence_returned_at = time.monotonic()


def sat_idle(conn) -> bool:
    """Whether a pooled connection is worth testing before it is handed out."""
    returned = getattr(conn, "_jobfence_returned_at", None)
    return returned is None or time.monotonic() - returned > _CHECK_AFTER_IDLE_SECONDS


# A restart drops every pooled connection, each found dead when next handed out: one line
# per pool a few seconds says so, with how many, instead of one per connection or none.
_LOST_EVERY = 5.0


class LostConnections:
    """The pools' check, sync (``check=LostConnections(name)``) and async
    (``check=LostConnections(name).check_async``): an idle connection is tested before it is
    handed out, and one the server dropped is logged as ``db_unavailable`` (then discarded
    and replaced by the pool). Without the line, an outage shorter than the pool's wait is
    ridden through in silence, and an operator reading the log never learns PostgreSQL was
    away. A connection that was just used is not tested: a check on every checkout would
    double the round trips of a busy caller."""

    def __init__(self, name: str):
        self.name = name
        self._tally = jlog.Tally(_LOST_EVERY)

    def __call__(self, conn: psycopg.Connection) -> None:
        if not sat_idle(conn):
            return
        try:
            ConnectionPool.check_connection(conn)
        except psycopg.Error as exc:
            self._lost(exc)
            raise

    async def check_async(self, conn: psycopg.AsyncConnection) -> None:
        if not sat_idle(conn):
            return
        try:
            await AsyncConnectionPool.check_connection(conn)
        except psycopg.Error as exc:
            self._lost(exc)
            raise

    def _lost(self, exc: psycopg.Error) -> None:
        count = self._tally.add()
        if count is not None:
            jlog.event(logger, logging.WARNING, "db_unavailable",
                       "a pooled connection to PostgreSQL was lost (server restarted or "
                       "connection dropped); reconnecting", pool=self.name, count=count,
                       error=" ".join(str(exc).split()))


def _complete_many_params(items: Sequence[tuple[int, int, Any]], worker: str) -> dict:
    return {"job_ids": [i[0] for i in items], "worker": worker,
            "lease_versions": [i[1] for i in items],
            "results": [None if i[2] is None else Jsonb(i[2]) for i in items]}


def _fail_many_params(items: Sequence[tuple[int, int, str, bool]], worker: str) -> dict:
    return {"job_ids": [i[0] for i in items], "worker": worker,
            "lease_versions": [i[1] for i in items], "errors": [i[2] for i in items],
            "retryable": [bool(i[3]) for i in items]}


# Connections that go through a transaction-mode pooler (PgBouncer pool_mode = transaction)
# may land on another server session for every transaction: nothing may live in the session
# (docs/scaling.md, "Through PgBouncer").
POOLER_ENV = "JOBFENCE_DATABASE_POOLER"
POOLERS = ("none", "transaction")


def pooler() -> str:
    """``JOBFENCE_DATABASE_POOLER``: ``none`` (the default: direct connections) or
    ``transaction``. Raises InvalidPooler for anything else."""
    value = os.environ.get(POOLER_ENV, "").strip().lower() or "none"
    if value not in POOLERS:
        raise InvalidPooler(f"{POOLER_ENV}={value!r}: expected one of {', '.join(POOLERS)}")
    return value


class InvalidPooler(ValueError):
    """A pooler setting the drivers do not know: a usage error."""


def connect_kwargs(name: str, statement_timeout: float | None = None) -> dict[str, Any]:
    """Connection arguments for every pool of the drivers. Behind a transaction pooler:
    no server-side prepared statements (psycopg prepares a statement it ran five times, on
    one server session, which the next transaction may not reach) and no startup options
    (PgBouncer refuses them), so a statement timeout is set per transaction instead
    (``Database``)."""
    kwargs: dict[str, Any] = {"autocommit": True, "application_name": name}
    if pooler() == "transaction":
        kwargs["prepare_threshold"] = None
    elif statement_timeout is not None:
        kwargs["options"] = f"-c statement_timeout={int(statement_timeout * 1000)}"
    return kwargs


def listen_url(database_url: str, listen_database_url: str | None, who: str) -> str:
    """The URL a LISTENing connection uses: LISTEN keeps a session, which a transaction
    pooler does not give, so behind one a direct URL is required."""
    if listen_database_url:
        check_database_url(listen_database_url)
        return listen_database_url
    if pooler() == "transaction":
        raise InvalidPooler(f"{who} LISTENs, which needs a session of its own: with "
                            f"{POOLER_ENV}=transaction give it a direct connection with "
                            "JOBFENCE_LISTEN_DATABASE_URL (or --listen-database-url)")
    return database_url


class InvalidDatabaseUrl(ValueError):
    """A database URL libpq cannot parse: a usage error, never worth a retry."""


def check_database_url(url: str) -> None:
    """Raise InvalidDatabaseUrl unless libpq can parse ``url`` and every port in it is one.
    libpq checks ports only when it connects, and then reports a bad one as a failed
    connection (one port per host, comma-separated)."""
    try:
        ports = conninfo_to_dict(url).get("port")
    except psycopg.ProgrammingError as exc:
        # libpq quotes the part it could not parse: passwords are masked by the caller.
        raise InvalidDatabaseUrl(f"invalid database URL: {' '.join(str(exc).split())}") from None
    for port in str(ports or "").split(","):
        if port.strip() and not (port.strip().isdigit() and 0 < int(port) < 65536):
            raise InvalidDatabaseUrl(f"invalid database URL: port {port.strip()!r} is not a number "
                                     "from 1 to 65535")


# What a server says when it refuses a connection for good (libpq's FATAL lines).
PERMANENT_REFUSALS = ("does not exist", "password authentication failed",
                      "no pg_hba.conf entry", "permission denied for database",
                      "authentication failed", "is not permitted to log in")


def _configure(conn: psycopg.Connection) -> None:
    """Every connection of a pool: one stored value Python's json refuses must not fail
    every read of its rows, and the hot calls' arrays are dumped whole (jobfence.arrays)."""
    tolerate(conn)
    arrays.register(conn)


class Database:
    """A small autocommit pool with a typed method per SQL function."""

    def __init__(self, url: str, *, max_size: int = 4, name: str = "jobfence",
                 open_timeout: float | None = None, timeout: float = 10.0,
                 statement_timeout: float | None = None):
        check_database_url(url)
        self.url = url
        self.name = name
        # A bound on every statement of this pool: a lease keeper must never wait on a lock
        # for longer than the leases it keeps alive.
        kwargs = connect_kwargs(name, statement_timeout)
        self._local_timeout_ms = (int(statement_timeout * 1000)
                                  if statement_timeout is not None and "options" not in kwargs
                                  else None)
        self.pool = ConnectionPool(
            url, min_size=1, max_size=max(1, max_size), open=False, name=name, timeout=timeout,
            kwargs=kwargs,
            # No reset callback: with one, the pool hands every returned connection to its
            # own thread (a queue put and a thread switch per call on the hot path), and the
            # next caller may find it not back yet. connection() stamps the return instead.
            check=LostConnections(name),
            configure=_configure,
            # Keep trying for as long as the process lives: PostgreSQL coming back later
            # must not leave a worker with an empty pool.
            reconnect_timeout=10 * 365 * 86400.0,
        )
        self.pool.open(wait=open_timeout is not None, timeout=open_timeout or 30.0)

    def close(self) -> None:
        self.pool.close()

    # -- plumbing -------------------------------------------------------------------------
    @contextlib.contextmanager
    def connection(self) -> Iterator[psycopg.Connection]:
        """A pooled connection. A pool that cannot connect only says how long it waited;
        then one direct attempt names the cause (refused, no such database, bad password),
        raised in place of the timeout."""
        try:
            with self.pool.connection() as conn:
                try:
                    yield conn
                finally:
                    stamp_returned(conn)
        except PoolTimeout as timeout:
            cause = self.why_unreachable()
            if cause is None:
                raise
            raise cause from timeout

    @staticmethod
    def permanent(cause: psycopg.OperationalError) -> bool:
        """Whether a failed connection will fail the same way however long one waits: the
        server answered and refused (no such database or role, a bad password, no
        pg_hba.conf entry, no CONNECT), as opposed to a server away or starting up. libpq
        reports these before a session exists, so there is no SQLSTATE: its words decide."""
        text = str(cause)
        return "FATAL:" in text and any(words in text for words in PERMANENT_REFUSALS)

    def why_unreachable(self, timeout: float = 3.0) -> psycopg.OperationalError | None:
        """The error of one direct connection attempt, or None when it succeeds."""
        try:
            psycopg.connect(self.url, connect_timeout=max(1, int(timeout)),
                            application_name=f"{self.name}-probe").close()
        except psycopg.OperationalError as exc:
            return exc
        return None

    @staticmethod
    def run(conn: psycopg.Connection, query, params: dict | None, row_factory) -> list:
        try:
            with conn.cursor(row_factory=row_factory) as cur:
                cur.execute(query, params)
                return cur.fetchall()
        except psycopg.Error as exc:
            mapped = translate(exc)
            if mapped is exc:
                raise
            raise mapped from None

    def _all(self, query, params: dict | None = None, row_factory=dict_row) -> list:
        with self.connection() as conn:
            if self._local_timeout_ms is None:
                return self.run(conn, query, params, row_factory)
            # Behind a transaction pooler the bound lives in the statement's own transaction,
            # sent with it in one round trip.
            with conn.pipeline(), conn.transaction():
                conn.execute(sql.SET_LOCAL_STATEMENT_TIMEOUT.format(ms=int(self._local_timeout_ms)))
                return self.run(conn, query, params, row_factory)

    def _one(self, query, params: dict | None = None, row_factory=dict_row):
        found = self._all(query, params, row_factory)
        return found[0] if found else None

    # -- producer -------------------------------------------------------------------------
    def submit(self, kind: str, payload: Any = None, *, idempotency_key: str | None = None,
               run_after: datetime | None = None, ordering_key: str | None = None,
               notify: bool = False, priority: int | None = None,
               conn: psycopg.Connection | None = None, **scope) -> rows.Job:
        """With ``conn``, on the caller's connection, inside its transaction. ``scope``:
        unique_while, unique_for, debounce, depends_on, on_dependency_failure, concurrency_key
        (``spec_options``)."""
        params = {"kind": kind, "payload": Jsonb({} if payload is None else payload),
                  "idempotency_key": idempotency_key, "run_after": checked_run_after(run_after),
                  "ordering_key": ordering_key, "notify": notify, "priority": priority,
                  **single_spec_options(**scope)}
        if conn is not None:
            return self.run(conn, sql.SUBMIT, params, rows.JOB)[0]
        return self._one(sql.SUBMIT, params, rows.JOB)

    def submit_created(self, kind: str, payload: Any = None, *, idempotency_key: str | None = None,
                       run_after: datetime | None = None,
                       ordering_key: str | None = None,
                       priority: int | None = None, **scope) -> tuple[rows.Job, bool]:
        """``submit(notify => false)`` answering (the job, whether this call created it):
        false for an idempotent repeat of an earlier submit."""
        job = self._one(sql.SUBMIT_CREATED, {
            "kind": kind, "payload": Jsonb({} if payload is None else payload),
            "idempotency_key": idempotency_key, "run_after": checked_run_after(run_after),
            "ordering_key": ordering_key, "priority": priority, **single_spec_options(**scope)}, rows.JOB)
        return rows.split_created(job)

    def submit_many(self, specs: Sequence[dict], conn: psycopg.Connection | None = None
                    ) -> list[rows.Job]:
        """With ``conn``, on the caller's connection, inside its transaction."""
        if conn is not None:
            return self.run(conn, sql.SUBMIT_MANY, {"specs": Jsonb(list(specs))}, rows.JOB)
        return self._all(sql.SUBMIT_MANY, {"specs": Jsonb(list(specs))}, rows.JOB)

    def submit_many_signals(self, specs: Sequence[dict]) -> list[tuple[int, str, datetime, bool, int]]:
        """``submit_many`` answering, in spec order, (id, queue, run_after, waits_for_signal,
        priority) only: what a producer pushes, without decoding whole job rows."""
        return self._all(sql.SUBMIT_MANY_SIGNALS, {"specs": Jsonb(list(specs))}, tuple_row)

    def fan_out(self, children: Sequence[dict], then_spec: dict) -> rows.Job:
        return self._one(sql.FAN_OUT, {"children": Jsonb(list(children)),
                                       "then_spec": Jsonb(then_spec)}, rows.JOB)

    def mark_enqueue_failed(self, job_ids: Iterable[int]) -> int:
        found = self._one(sql.MARK_ENQUEUE_FAILED, {"job_ids": list(job_ids)})
        return int(found["marked"] or 0)

    # -- types ----------------------------------------------------------------------------
    def define_type(self, kind: str, **options) -> dict:
        params = {"kind": kind}
        for name, value in options.items():
            params[name] = _seconds(value) if name in (
                "lease_timeout", "timeout", "backoff_base", "backoff_max", "slo_latency", "run_time_budget",
                "rate_period") else value
        return self._one(sql.define_type(options), params)

    # -- worker ---------------------------------------------------------------------------
    def claim_many(self, job_ids: Sequence[int], worker: str,
                   queues: Sequence[str] | None = None) -> list[rows.Lease]:
        """Leases for those of ``job_ids`` claimable now (and, given ``queues``, in one of
        them: another queue's id is skipped)."""
        return self._all(sql.CLAIM_MANY, {"job_ids": list(job_ids), "worker": worker,
                                          "queues": None if queues is None else list(queues)},
                         rows.LEASE)

    def heartbeat(self, job_id: int, worker: str, lease_version: int) -> rows.Heartbeat:
        return self._one(sql.HEARTBEAT, {"job_id": job_id, "worker": worker,
                                         "lease_version": lease_version}, rows.HEARTBEAT)

    def complete(self, job_id: int, worker: str, lease_version: int, result: Any = None,
                 conn: psycopg.Connection | None = None) -> rows.Outcome:
        params = {"job_id": job_id, "worker": worker, "lease_version": lease_version,
                  "result": None if result is None else Jsonb(result)}
        if conn is not None:
            return self.run(conn, sql.COMPLETE, params, rows.OUTCOME)[0]
        return self._one(sql.COMPLETE, params, rows.OUTCOME)

    def complete_many(self, items: Sequence[tuple[int, int, Any]], worker: str) -> list[rows.Outcome]:
        """items: (job_id, lease_version, result); one outcome per item, in order."""
        return self._all(sql.COMPLETE_MANY, _complete_many_params(items, worker), rows.OUTCOME)

    def fail_many(self, items: Sequence[tuple[int, int, str, bool]], worker: str) -> list[rows.Outcome]:
        """items: (job_id, lease_version, error, retryable); one outcome per item, in order."""
        return self._all(sql.FAIL_MANY, _fail_many_params(items, worker), rows.OUTCOME)

    def heartbeat_many(self, leases: Sequence[tuple[int, int]], worker: str) -> list[rows.Beat]:
        """leases: (job_id, lease_version); one row per lease, never waiting on a row lock."""
        return self._all(sql.HEARTBEAT_MANY, {
            "job_ids": [i[0] for i in leases], "worker": worker,
            "lease_versions": [i[1] for i in leases]}, rows.BEAT)

    def fail(self, job_id: int, worker: str, lease_version: int, error: str,
             retryable: bool = True) -> rows.Outcome:
        return self._one(sql.FAIL, {"job_id": job_id, "worker": worker,
                                    "lease_version": lease_version, "error": error,
                                    "retryable": retryable}, rows.OUTCOME)

    # -- reaper ---------------------------------------------------------------------------
    def reap(self, max_jobs: int = 1000) -> list[rows.Signal]:
        return self._all(sql.REAP, {"max_jobs": max_jobs}, rows.SIGNAL)

    def recover_enqueue_failed(self, max_jobs: int = 1000) -> list[rows.Signal]:
        return self._all(sql.RECOVER_ENQUEUE_FAILED, {"max_jobs": max_jobs}, rows.SIGNAL)

    def stale_queued(self, queue: str, older_than: float | timedelta = 5.0,
                     max_jobs: int = 1000) -> list[rows.Signal]:
        return self._all(sql.STALE_QUEUED, {"queue": queue, "older_than": _seconds(older_than),
                                            "max_jobs": max_jobs}, rows.SIGNAL)

    def signals(self, job_ids: Sequence[int]) -> list[rows.Signal]:
        """Where to push those of the jobs that wait for a signal (queued, no pending children)."""
        if not job_ids:
            return []
        return self._all(sql.SIGNALS, {"job_ids": arrays.BigintArray(job_ids)}, rows.SIGNAL)

    def relay_source(self) -> str:
        """How submits reach the relay: ``notify`` or ``table`` (``jobs.configure_relay``)."""
        return self._one(sql.RELAY_SOURCE)["relay_source"]

    def poll_submitted(self, max_ids: int = 10_000) -> list[tuple]:
        """The next stretch of new jobs to push, as ``push_signals`` tuples: empty unless
        submits do not notify (or a stretch from then is left), or while another relay reads."""
        return self._all(sql.POLL_SUBMITTED, {"max_ids": max_ids}, tuple_row)

    def push_signals(self, job_ids: Sequence[int]) -> list[tuple]:
        """``signals`` as the (job_id, queue, run_after, priority) tuples ``Transport.push``
        takes, with no row object per job: the relay's lookup for every id it is told of."""
        if not job_ids:
            return []
        return self._all(sql.SIGNALS, {"job_ids": arrays.BigintArray(job_ids)}, tuple_row)

    def redis_namespace(self) -> str:
        """The prefix of this deployment's Redis keys (``jobs.redis_namespace``)."""
        return self._one(sql.REDIS_NAMESPACE)["namespace"]

    def queues(self) -> list[str]:
        return [r["queue"] for r in self._all(sql.QUEUES)]

    def held_back(self, job_ids: Sequence[int]) -> list[rows.Signal]:
        """Of ``job_ids``, those a kind's global limit kept from being claimed, with when to
        push them again (``jobs.held_back``)."""
        if not job_ids:
            return []
        return self._all(sql.HELD_BACK, {"job_ids": list(job_ids)}, rows.SIGNAL)

    def missed(self, job_ids: Sequence[int], queues: Sequence[str] | None
               ) -> tuple[list[rows.Signal], dict[str, list[int]]]:
        """For ids a claim did not grant: the ones a kind's limit held back, to push again
        (``jobs.held_back``), and every id by why it was not granted (``jobs.unclaimed``:
        unknown, other_queue, passed_over, not_claimable). One round trip."""
        if not job_ids:
            return [], {}
        held: list[rows.Signal] = []
        causes: dict[str, list[int]] = {}
        for job_id, queue, run_after, priority, cause in self._all(
                sql.MISSED, {"job_ids": list(job_ids),
                             "queues": None if queues is None else list(queues)}, tuple_row):
            if cause is None:
                held.append(rows.Signal(job_id, queue, run_after, priority))
            else:
                causes.setdefault(cause, []).append(job_id)
        return held, causes

    # -- paused queues --------------------------------------------------------------------
    def pause(self, queue: str) -> bool:
        """``jobs.pause``: True if the queue was running."""
        return bool(self._one(sql.PAUSE, {"queue": queue})["changed"])

    def resume(self, queue: str) -> bool:
        """``jobs.resume``: True if the queue was paused. The caller signals its jobs."""
        return bool(self._one(sql.RESUME, {"queue": queue})["changed"])

    def paused_queues(self) -> list[dict]:
        return self._all(sql.PAUSED_QUEUES)

    def keyed_queues(self, queues: Sequence[str] | None = None) -> list[str]:
        """Of ``queues`` (all when None), those holding queued jobs with a concurrency key
        (``jobs.keyed_queues``): where a worker claims fairly instead of by id."""
        return [r["queue"] for r in self._all(
            sql.KEYED_QUEUES, {"queues": None if queues is None else list(queues)})]

    def types(self) -> dict[str, dict]:
        return {r["kind"]: r for r in self._all(sql.TYPES)}

    # -- operators ------------------------------------------------------------------------
    def get(self, job_id: int) -> rows.Job:
        return self._one(sql.GET, {"job_id": job_id}, rows.JOB)

    def status_counts(self, job_ids: Sequence[int]) -> dict[str, int]:
        return {r["status"]: int(r["n"]) for r in self._all(sql.STATUS_COUNTS,
                                                             {"job_ids": list(job_ids)})}

    def latencies(self, job_ids: Sequence[int]) -> list[tuple[str, float]]:
        """(kind, seconds from due to end) of those of the jobs that ended."""
        return [(r["kind"], r["seconds"]) for r in self._all(sql.LATENCIES, {"job_ids": list(job_ids)})]

    def list_jobs(self, *, kind: str | None = None, status: str | None = None,
                  before_id: int | None = None, max_jobs: int = 100,
                  queue: str | None = None, ordering_key: str | None = None) -> list[rows.Job]:
        """Jobs newest first; page on with ``before_id`` = the last id of the previous page."""
        return self._all(sql.LIST_JOBS, {"kind": kind, "status": status, "before_id": before_id,
                                         "max_jobs": max_jobs, "queue": queue,
                                         "ordering_key": ordering_key}, rows.JOB)

    def events(self, job_id: int) -> list[rows.Event]:
        return self._all(sql.EVENTS, {"job_id": job_id}, rows.EVENT)

    def children(self, job_id: int) -> list[rows.Job]:
        return self._all(sql.CHILDREN, {"job_id": job_id}, rows.JOB)

    def dependencies(self, job_id: int) -> list[rows.Neighbour]:
        return self._all(sql.DEPENDENCIES, {"job_id": job_id}, rows.NEIGHBOUR)

    def dependents(self, job_id: int) -> list[rows.Neighbour]:
        return self._all(sql.DEPENDENTS, {"job_id": job_id}, rows.NEIGHBOUR)

    def cancel(self, job_id: int, reason: str = "cancelled") -> rows.Outcome:
        return self._one(sql.CANCEL, {"job_id": job_id, "reason": reason}, rows.OUTCOME)

    def replay(self, job_id: int) -> bool:
        return bool(self._one(sql.REPLAY, {"job_id": job_id})["replayed"])

    def replay_many(self, kind: str | None, *, error_like: str | None = None,
                    failed_since: datetime | None = None, max_jobs: int = 1000) -> list[rows.Signal]:
        """``jobs.replay_many``: the re-queued jobs, to signal."""
        return self._all(sql.REPLAY_MANY, {"kind": kind, "error_like": error_like,
                                           "failed_since": failed_since, "max_jobs": max_jobs},
                         rows.SIGNAL)

    # -- observability (docs/observability.md) ----------------------------------------------
    def queue_depth(self) -> list[dict]:
        """One row per queue and kind: the backlog by cause, in flight, enqueue_failed."""
        return self._all(sql.QUEUE_DEPTH)

    def metrics(self, since: float | timedelta = 3600.0) -> list[dict]:
        """One row per kind over the last ``since`` (seconds or a timedelta): counts,
        percentiles in seconds, SLO attainment and error budget (``jobs.metrics``)."""
        return self._all(sql.METRICS, {"since": _seconds(since)})

    def audit(self, reaper_interval: float | timedelta = 5.0, examples: int = 10) -> list[dict]:
        """One row per invariant over the recorded history (``jobs.audit``)."""
        return self._all(sql.AUDIT, {"reaper_interval": _seconds(reaper_interval),
                                     "examples": examples})

    def prune(self, older_than: float | timedelta, max_jobs: int | None = 5000) -> int:
        """``jobs.prune``: delete terminal jobs finished before ``older_than``, at most
        ``max_jobs`` per call, each call its own transaction (their events go with their
        day partitions: ``drop_event_partitions``)."""
        if not isinstance(older_than, timedelta):
            older_than = timedelta(seconds=older_than)
        return int(self._one(sql.PRUNE, {"older_than": older_than, "max_jobs": max_jobs})["pruned"])

    def create_event_partitions(self, ahead: float | timedelta = 3 * 86400.0) -> int:
        """``jobs.create_event_partitions``: the day partitions of jobs.event from today
        through ``ahead``; returns how many were missing (the reaper, every minute)."""
        if not isinstance(ahead, timedelta):
            ahead = timedelta(seconds=ahead)
        return int(self._one(sql.CREATE_EVENT_PARTITIONS, {"ahead": ahead})["created"])

    def drop_event_partitions(self, older_than: float | timedelta) -> int:
        """``jobs.drop_event_partitions``: drop the day partitions of jobs.event entirely
        older than ``older_than`` that no remaining job has events in; returns how many."""
        if not isinstance(older_than, timedelta):
            older_than = timedelta(seconds=older_than)
        return int(self._one(sql.DROP_EVENT_PARTITIONS, {"older_than": older_than})["dropped"])

    def compact_metrics(self, max_rows: int = 10_000) -> int:
        """Fold closed minutes' shards of the rollup (the reaper, every tick)."""
        return int(self._one(sql.COMPACT_METRICS, {"max_rows": max_rows})["folded"])

    # -- dead-letter pages (docs/observability.md, "Dead letters") -------------------------
    def claim_pages(self, max_pages: int, hold: float) -> list[dict]:
        """Up to ``max_pages`` undelivered pages due now, held for ``hold`` seconds."""
        return self._all(sql.CLAIM_PAGES, {"max_pages": max_pages, "hold": timedelta(seconds=hold)})

    def settle_pages(self, outcomes: Sequence[tuple[int, str | None]], retry_base: float,
                     retry_max: float) -> int:
        """(page id, error or None for delivered) per claimed page; returns how many were
        delivered."""
        if not outcomes:
            return 0
        return int(self._one(sql.SETTLE_PAGES, {
            "page_ids": [page_id for page_id, _ in outcomes],
            "errors": [error for _, error in outcomes],
            "retry_base": timedelta(seconds=retry_base),
            "retry_max": timedelta(seconds=retry_max)})["delivered"])

    def pages(self, undelivered_only: bool = True, max_pages: int = 100) -> list[dict]:
        return self._all(sql.PAGES, {"undelivered_only": undelivered_only, "max_pages": max_pages})

    def page_backlog(self) -> dict:
        """{undelivered, failing, oldest_at} of the dead-letter pages."""
        return self._one(sql.PAGE_BACKLOG)

    def dead_letters(self, job_ids: Sequence[int]) -> list[dict]:
        """Those of the jobs that are dead letters (failed, not cancelled), with their error."""
        if not job_ids:
            return []
        return self._all(sql.DEAD_LETTERS, {"job_ids": list(job_ids)})
