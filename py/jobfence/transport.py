"""Redis transport: job ids only. Everything here can be lost without losing a job, because
PostgreSQL can rebuild it (the reaper re-pushes claimable jobs when a ready list is empty).

Each queue has one ready list and one delayed set per priority band (a job's priority, 0 to
9): band 0 keeps the historical key names, band N appends ``:pN``. A pop takes the first
non-empty list in band order, so a high-priority id overtakes any backlog of lower bands;
within a band the list stays FIFO (docs/sql-api.md, "Priorities")."""

from __future__ import annotations

import logging
import re
import time
from collections import defaultdict
from typing import Callable, Iterable, NamedTuple, Sequence

import redis

from . import log as jlog
from . import redis_urls

logger = logging.getLogger("jobfence.transport")

# Job ids are PostgreSQL bigint identities: 1 .. 2^63-1, written by str(int).
MAX_JOB_ID = 2**63 - 1
_ID = re.compile(rb"[1-9][0-9]{0,18}")


def parse_job_id(raw: bytes | str | int) -> int | None:
    """The job id a ready-list entry names, or None for anything that is not a positive
    64-bit integer in canonical decimal form (junk must never reach jobs.claim_many)."""
    if type(raw) is bytes:
        # What a pop returns: ASCII digits only (bytes.isdigit knows no other), no sign,
        # no leading zero, no separator; checked without the regular expression.
        if 0 < len(raw) <= 19 and raw[0] != 48 and raw.isdigit():
            value = int(raw)
            return value if value <= MAX_JOB_ID else None
        return None
    if isinstance(raw, int) and not isinstance(raw, bool):
        return raw if 1 <= raw <= MAX_JOB_ID else None
    if isinstance(raw, str):
        raw = raw.encode("utf-8", "replace")
    if not isinstance(raw, bytes) or not _ID.fullmatch(raw):
        return None
    value = int(raw)
    return value if value <= MAX_JOB_ID else None

# Priorities 0..9 (jobs.job.priority), one band each: lower runs first.
BANDS = 10
# How many popped ids a Transport remembers the band of (see Transport.push).
REMEMBERED_BANDS = 65536

# The ready list is a FIFO: producers LPUSH, workers pop from the right.
# Moving due ids must be atomic so that several reapers (and workers) never move one twice.
# Every type is checked before anything is written: a script is not rolled back, and a
# ZREM followed by a failing LPUSH would drop the ids it took. KEYS holds the queue's
# delayed sets (bands 0..9), then its ready lists in the same order; each band's due ids go
# to that band's ready list, the most urgent bands first when the limit cuts the move short.
_MOVE_DUE = """
local bands = #KEYS / 2
for i = 1, #KEYS do
  local want = i <= bands and 'zset' or 'list'
  local t = redis.call('TYPE', KEYS[i]).ok
  if t ~= want and t ~= 'none' then
    return redis.error_reply('WRONGTYPE key ' .. i .. ' (' .. KEYS[i] .. ') holds a ' .. t ..
                             ', not a ' .. want)
  end
end
local left = tonumber(ARGV[2])
local moved = 0
for b = 1, bands do
  if left <= 0 then break end
  local ids = redis.call('ZRANGEBYSCORE', KEYS[b], '-inf', ARGV[1], 'LIMIT', 0, left)
  if #ids > 0 then
    redis.call('ZREM', KEYS[b], unpack(ids))
    redis.call('LPUSH', KEYS[bands + b], unpack(ids))
    moved = moved + #ids
    left = left - #ids
  end
end
return moved
"""

# Deletes the key only if it still holds the wrong type when the script runs: a list or
# zset written back by a producer since the caller looked is never touched.
_DROP_WRONG_TYPE = """
local t = redis.call('TYPE', KEYS[1]).ok
if t == ARGV[1] or t == 'none' then
  return false
end
redis.call('DEL', KEYS[1])
return t
"""

_WRONG_KEY = re.compile(r"WRONGTYPE key ([0-9]+) ")

WARN_EVERY = 60.0  # seconds between two warnings about one corrupt key
# How long a worker leaves a wrong-type ready list out of its pops before looking again:
# short, so that the queue is served again soon after the reaper's repair.
RECHECK_AFTER = 1.0
EXPECTED_TYPE = {"ready": "list", "delayed": "zset"}


def is_corruption(exc: BaseException) -> bool:
    """A Redis error about one key's contents, as opposed to a lost, read-only or full
    server: retrying with backoff cannot cure it, skipping the key can."""
    return isinstance(exc, redis.ResponseError) and str(exc).startswith("WRONGTYPE")


def key_text(key: bytes | str) -> str:
    """A key name fit for a log line, whatever bytes it holds."""
    if isinstance(key, bytes):
        return key.decode("utf-8", "backslashreplace")
    return key.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


class KeyWarnings:
    """One warning per key per ``every`` seconds: a corruption that stays (nobody repairs
    it) must not write a line per pop. The next warning counts those held back."""

    def __init__(self, logger: logging.Logger, every: float = WARN_EVERY):
        self.logger = logger
        self._throttle = jlog.Throttle(every)

    def warn(self, event: str, message: str, key: bytes | str, error: BaseException | str,
             **fields) -> bool:
        name = key_text(key)
        held = self._throttle.allow((event, name))
        if held is None:
            return False
        if held:
            fields["suppressed"] = held
        jlog.event(self.logger, logging.WARNING, event, message, key=name,
                   error=str(error)[:500], **fields)
        return True


class WrongType(redis.ResponseError):
    """A jobfence key holds another type than the one jobfence keeps there."""

    def __init__(self, message: str, key: str):
        super().__init__(message)
        self.key = key


class Failed(NamedTuple):
    """Signals a push could not write because one key refused them."""
    key: str
    error: str
    signals: list


def band_of(priority) -> int:
    """The band a job's priority names; a signal without one (an older driver) is band 0."""
    if priority is None:
        return 0
    return min(max(int(priority), 0), BANDS - 1)


# The namespace a key starts with when none is named: what a deployment's
# jobs.redis_namespace() says otherwise (a random jobfence-<hex> unless an administrator set
# one with jobs.configure_redis), so that two deployments sharing a Redis database never
# pop each other's ids.
DEFAULT_NAMESPACE = "jobfence"


def ready_key(queue: str, band: int = 0, namespace: str = DEFAULT_NAMESPACE) -> str:
    # The braces are literal: a Redis Cluster hash tag keeping a queue's keys in one slot.
    return f"{namespace}:{{{queue}}}:ready" + (f":p{band}" if band else "")


def delayed_key(queue: str, band: int = 0, namespace: str = DEFAULT_NAMESPACE) -> str:
    return f"{namespace}:{{{queue}}}:delayed" + (f":p{band}" if band else "")


def ready_keys(queue: str, namespace: str = DEFAULT_NAMESPACE) -> list[str]:
    return [ready_key(queue, b, namespace) for b in range(BANDS)]


def delayed_keys(queue: str, namespace: str = DEFAULT_NAMESPACE) -> list[str]:
    return [delayed_key(queue, b, namespace) for b in range(BANDS)]


def band_of_key(key: bytes | str) -> int:
    """The band a ready or delayed key holds: 0 for the unsuffixed names, N for ``:pN``."""
    text = key.decode("utf-8", "surrogateescape") if isinstance(key, bytes) else key
    last = text.rsplit("}", 1)[-1].rsplit(":", 1)[-1]
    return int(last[1:]) if last.startswith("p") and last[1:].isdigit() else 0


def key_role(key: str) -> str:
    """"ready" or "delayed": what a jobfence key holds, whatever its band."""
    return key.rsplit("}", 1)[-1].split(":")[1]


def _raw(key: str) -> bytes:
    # A queue name typed on a command line may carry bytes that are not UTF-8 (they arrive
    # as lone surrogates): send those bytes, rather than fail in the encoder on every call.
    return key.encode("utf-8", "surrogateescape")


def _epoch(run_after) -> float | None:
    if run_after is None:
        return None
    return run_after.timestamp() if hasattr(run_after, "timestamp") else float(run_after)


def fill_pipeline(pipe, signals: Iterable[tuple], namespace: str = DEFAULT_NAMESPACE) -> int:
    """Queue the commands pushing (job_id, queue, run_after[, priority]) tuples on a
    pipeline (sync or asyncio): due ids to their band's ready list, later ones to its
    delayed set."""
    plan = _by_key(signals, namespace)
    for key, sent in plan.items():
        _queue_command(pipe, key, sent)
    return sum(len(sent) for sent in plan.values())


def _queue_command(pipe, key: str, sent: list) -> None:
    if key_role(key) == "ready":
        pipe.lpush(_raw(key), *[str(s[0]) for s, _ in sent])
    else:
        pipe.zadd(_raw(key), {str(s[0]): at for s, at in sent})


def _by_key(signals: Iterable[tuple], namespace: str) -> dict[str, list]:
    """The signals grouped by the key each goes to, as (signal, run_after epoch) pairs. The
    relay routes every submitted id through here, so a key's band and name are worked out
    once per batch (per queue, priority and due-or-later), not once per id."""
    now = time.time()
    out: dict[str, list] = defaultdict(list)
    keys: dict[tuple, str] = {}
    # A batch's ids mostly share one run_after (one submit's now()): converting an aware
    # timestamp costs more than comparing two, so a conversion is reused while it repeats.
    last_when, last_at = None, None
    for signal in signals:
        when = signal[2]
        if when is None:
            at = None
        elif when == last_when:
            at = last_at
        else:
            at = last_at = _epoch(when)
            last_when = when
        route = (signal[1], signal[3] if len(signal) > 3 else None, at is None or at <= now)
        key = keys.get(route)
        if key is None:
            queue, priority, due = route
            band = band_of(priority)
            key = keys[route] = (ready_key(queue, band, namespace) if due
                                 else delayed_key(queue, band, namespace))
        out[key].append((signal, at))
    return out


class Transport:
    """Push, pop and move job ids. Every method may raise ``redis.RedisError``; callers decide
    whether that is worth a retry (a worker) or a ``mark_enqueue_failed`` (a producer)."""

    def __init__(self, url: str, *, socket_timeout: float = 5.0,
                 namespace: str | Callable[[], str] = DEFAULT_NAMESPACE):
        """``namespace``: the deployment's (``jobs.redis_namespace()``), or a function that
        asks for it, called at the first use of a key (a producer need not reach PostgreSQL
        to be built)."""
        self.url = url
        self._namespace = namespace
        # One server, a Sentinel-watched primary or a cluster (redis_urls.py).
        self.redis = redis_urls.connect(
            url, socket_timeout=socket_timeout, socket_connect_timeout=2.0,
            health_check_interval=30)
        self._move_due = self.redis.register_script(_MOVE_DUE)
        self._drop_wrong_type = self.redis.register_script(_DROP_WRONG_TYPE)
        self._skipped: dict[str, float] = {}  # ready key -> when to try it again
        self.warnings = KeyWarnings(logger)
        self._junk = jlog.Tally(WARN_EVERY)
        self.last_popped: bytes | None = None  # the ready key the last pop took ids from
        self.last_queue: str | None = None  # ... and the queue it belongs to
        # job id -> the band it was popped from, for the signals this process pushes back
        # without a priority (a worker's retries and snoozes: their outcome names no priority).
        self._popped_bands: dict[int, int] = {}
        self._cluster = redis_urls.is_cluster(self.redis)

    @property
    def namespace(self) -> str:
        if callable(self._namespace):
            self._namespace = self._namespace()
        return self._namespace

    @namespace.setter
    def namespace(self, value: str) -> None:
        self._namespace = value

    def ready_key(self, queue: str, band: int = 0) -> str:
        return ready_key(queue, band, self.namespace)

    def delayed_key(self, queue: str, band: int = 0) -> str:
        return delayed_key(queue, band, self.namespace)

    def close(self) -> None:
        self.redis.close()

    def ping(self) -> bool:
        return bool(self.redis.ping())

    def _banded(self, signals: Iterable[tuple]) -> list[tuple]:
        """A signal without a priority, for an id this transport popped, goes back to the band
        it came from (the job's priority); any other to band 0."""
        bands = self._popped_bands  # written by the popping thread: one get() per signal
        if not bands:
            return list(signals)
        out = []
        for s in signals:
            band = None if len(s) > 3 else bands.get(s[0])
            out.append(s if band is None else (s[0], s[1], s[2], band))
        return out

    def push(self, signals: Iterable[tuple]) -> int:
        """Push (job_id, queue, run_after[, priority]) tuples: due ids to their band's ready
        list, later ones to its delayed set scored by run_after epoch. One round trip."""
        pipe = self.redis.pipeline(transaction=False)
        count = fill_pipeline(pipe, self._banded(signals), self.namespace)
        if count:
            pipe.execute()
        return count

    def push_each(self, signals: Iterable[tuple]) -> list[Failed]:
        """``push``, except that a key refusing its command (a wrong type) fails only the
        signals bound for it: the others are written all the same. Returns what failed,
        per key; a lost server still raises."""
        plan = _by_key(self._banded(signals), self.namespace)
        if not plan:
            return []
        pipe = self.redis.pipeline(transaction=False)
        for key, sent in plan.items():
            _queue_command(pipe, key, sent)
        failed = []
        for (key, sent), result in zip(plan.items(), pipe.execute(raise_on_error=False)):
            if isinstance(result, Exception):
                if not is_corruption(result):
                    raise result
                failed.append(Failed(key, str(result), [s for s, _ in sent]))
        return failed

    def push_ids(self, queue: str, job_ids: Sequence[int], priority: int = 0) -> int:
        return self.push((i, queue, None, priority) for i in job_ids)

    def give_back(self, job_ids: Sequence[int]) -> bool:
        """Put ids the last pop took back at the head of the list they came from (their
        queue and band), as if never popped. False if there is nothing to give back."""
        if not job_ids or self.last_popped is None:
            return False
        self.redis.rpush(self.last_popped, *(str(i) for i in reversed(job_ids)))
        return True

    def drop_wrong_type(self, key: str) -> str | None:
        """Delete ``key`` if it holds something other than what jobfence keeps there (a
        list for a ready key, a zset for a delayed one); returns the type it held. Nothing
        is lost: such a key holds no signal jobfence wrote, and PostgreSQL has the jobs."""
        expected = EXPECTED_TYPE[key_role(key)]
        found = self._drop_wrong_type(keys=[_raw(key)], args=[expected])
        self._skipped.pop(key, None)
        return found.decode() if isinstance(found, bytes) else found

    def _usable(self, keys: list[str]) -> list[str]:
        now = time.monotonic()
        return [k for k in keys if self._skipped.get(k, 0.0) <= now]

    def _skip_wrong_types(self, keys: list[str], exc: Exception) -> bool:
        """After a pop refused with WRONGTYPE (BLMPOP refuses if any of its keys is not a
        list, even one it would not have reached): find the culprits and leave them out for
        a while, so that the other queues are still served. False if none was found."""
        pipe = self.redis.pipeline(transaction=False)
        for key in keys:
            pipe.type(_raw(key))
        found = False
        until = time.monotonic() + RECHECK_AFTER
        for key, kind in zip(keys, pipe.execute()):
            kind = kind.decode() if isinstance(kind, bytes) else kind
            if kind not in ("list", "none"):
                found = True
                self._skipped[key] = until
                self.warnings.warn("redis_key_skipped", f"ready key holds a {kind}, not a "
                                   "list: its queue is not popped until it is repaired (the "
                                   "reaper deletes it)", key, exc, type=kind)
        return found

    def _blmpop(self, keys: list[str], count: int, timeout: float):
        """BLMPOP over ``keys`` in order. On a Redis Cluster a queue's keys share a slot but
        the queues of one worker may not, and one command may not span slots: then the
        fullest-priority ready list is found with one pipeline of LLEN (served by every node
        at once) and popped without blocking; when all are empty the pop blocks on each slot
        in turn for its share of ``timeout``."""
        groups = self._slot_groups(keys) if self._cluster else None
        if groups is None or len(groups) == 1:
            return self.redis.blmpop(timeout, len(keys), *map(_raw, keys),
                                     direction="RIGHT", count=count)
        pipe = self.redis.pipeline(transaction=False)
        for key in keys:
            pipe.llen(_raw(key))
        for key, length in zip(keys, pipe.execute()):
            if length:
                group = groups[self.redis.keyslot(key)]
                found = self.redis.lmpop(len(group), *map(_raw, group), direction="RIGHT",
                                         count=count)
                if found:
                    return found
        share = max(0.01, timeout / len(groups))
        for group in groups.values():
            found = self.redis.blmpop(share, len(group), *map(_raw, group), direction="RIGHT",
                                      count=count)
            if found:
                return found
        return None

    def _slot_groups(self, keys: list[str]) -> dict[int, list[str]]:
        """A cluster's keys by hash slot, each group in the order given."""
        groups: dict[int, list[str]] = {}
        for key in keys:
            groups.setdefault(self.redis.keyslot(key), []).append(key)
        return groups

    def pop(self, queues: Sequence[str], count: int, timeout: float) -> list[int]:
        """Block up to ``timeout`` seconds for up to ``count`` ids from the first non-empty
        ready list, the most urgent band of every queue first (then the queues in the order
        given). The short timeout keeps shutdown prompt. A ready key of the wrong type is
        left out (and warned about) instead of failing the pop of every queue."""
        queue_of = {ready_key(q, b, self.namespace): q for b in range(BANDS) for q in queues}
        keys = self._usable(list(queue_of))
        for _ in range(2):
            if not keys:
                # Every queue is unusable: wait as a pop would, not in a hot loop.
                time.sleep(timeout)
                return []
            try:
                found = self._blmpop(keys, count, timeout)
                break
            except redis.ResponseError as exc:
                if not is_corruption(exc) or not self._skip_wrong_types(keys, exc):
                    raise
                keys = self._usable(keys)
        else:
            return []
        if not found:
            return []
        key, ids = found
        self.last_popped = key
        self.last_queue = queue_of.get(key_text(key))
        band = band_of_key(key)
        bands = self._popped_bands
        out, junk = [], []
        for raw in ids:
            job_id = parse_job_id(raw)
            if job_id is None:
                junk.append(raw)  # not a job: dropping it loses nothing
            else:
                out.append(job_id)
                if band:
                    bands[job_id] = band
                else:
                    bands.pop(job_id, None)
        while len(bands) > REMEMBERED_BANDS:
            del bands[next(iter(bands))]  # the oldest: its job has long been reported
        if junk:
            self._junk_dropped(key, junk)
        return out

    def _junk_dropped(self, key, junk: list) -> None:
        """One line a minute per key, with how many entries it covers: a list stuffed with
        junk (anyone who can write to Redis can) must not become a line per pop."""
        name = key_text(key)
        count = self._junk.add(name, len(junk))
        if count is None:
            return
        jlog.event(logger, logging.WARNING, "junk_signals_dropped",
                   "discarded ready-list entries that are not job ids (positive 64-bit "
                   "integers)", key=name, count=count, sample=[repr(j)[:40] for j in junk[:5]])

    def move_due(self, queue: str, limit: int = 1000) -> int:
        """Raises ``WrongType`` having moved nothing if either key holds the wrong type."""
        keys = delayed_keys(queue, self.namespace) + ready_keys(queue, self.namespace)
        try:
            return int(self._move_due(keys=[_raw(k) for k in keys], args=[time.time(), limit]))
        except redis.ResponseError as exc:
            found = _WRONG_KEY.match(str(exc))
            if found:
                raise WrongType(str(exc), keys[int(found.group(1)) - 1]) from exc
            raise

    def ready_length(self, queue: str) -> int:
        """Ids waiting in every band of the queue's ready lists."""
        keys = ready_keys(queue, self.namespace)
        pipe = self.redis.pipeline(transaction=False)
        for key in keys:
            pipe.llen(_raw(key))
        total = 0
        for key, n in zip(keys, pipe.execute(raise_on_error=False)):
            if isinstance(n, Exception):
                if is_corruption(n):
                    raise WrongType(str(n), key) from n
                raise n
            total += int(n)
        return total
