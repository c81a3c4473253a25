"""Submitting the mix while faults happen: most batches with ``Client.submit_many`` (commit,
then push), some as an SQL producer would (``notify => true``, the relay pushes), some
through the HTTP API, and fan-out families through both. A submit whose answer was lost is
sent again with the same idempotency keys until it is acknowledged, so "acknowledged" means
the producer holds the id."""

from __future__ import annotations

import json
import logging
import threading
import time
import urllib.error
import urllib.request

import psycopg
import psycopg_pool
import redis

from jobfence.client import Client
from jobfence.db import Database, job_spec

from .mix import Mix

log = logging.getLogger("jobfence.chaos")

RETRYABLE = (psycopg.OperationalError, psycopg_pool.PoolTimeout, redis.RedisError, OSError,
             TimeoutError)


class ApiUnavailable(Exception):
    pass


def _api_spec(spec: dict) -> dict:
    out = dict(spec)
    if out.get("run_after") is not None:
        out["run_after"] = out["run_after"].isoformat()
    return out


class Producer:
    def __init__(self, mix: Mix, database_url: str, redis_url: str, api_url: str, *,
                 rate: float, tick: float = 0.25, api_share: float = 0.1,
                 sql_share: float = 0.1, families_per_tick: float = 0.5):
        self.mix = mix
        self.client = Client(database_url, redis_url, pool_size=2, timeout=5.0)
        self.sql_db = Database(database_url, max_size=1, name="jobfence-chaos-producer",
                               timeout=5.0)
        self.api_url = api_url
        self.rate, self.tick = rate, tick
        self.api_share, self.sql_share = api_share, sql_share
        self.families_per_tick = families_per_tick
        self.acked: dict[int, str] = {}          # job id -> route that submitted it
        self.coordinators: list[int] = []
        self.unacked = 0                         # specs given up at the deadline
        self.retries = 0
        self.errors: list[str] = []              # ticks lost to an unexpected error
        self.lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._give_up_at = float("inf")

    # -- routes -----------------------------------------------------------------------------
    def _via_client(self, specs):
        return self.client.submit_many(specs)

    def _via_sql(self, specs):
        rows = self.sql_db.submit_many([job_spec(s["kind"], s.get("payload"), notify=True,
                                              **{k: v for k, v in s.items()
                                                 if k not in ("kind", "payload")})
                                        for s in specs])
        return [r.id for r in rows]

    def _post(self, path: str, body: dict) -> dict:
        req = urllib.request.Request(self.api_url + path, data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"},
                                     method="POST")
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                return json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            if exc.code >= 500:
                # 503 while PostgreSQL is away; any 5xx is the server's trouble, not the
                # request's, and the same keys make a repeat safe.
                raise ApiUnavailable(f"HTTP {exc.code} from {path}") from None
            raise
        except (urllib.error.URLError, ConnectionError) as exc:
            raise ApiUnavailable(str(exc)) from None

    def _via_api(self, specs):
        body = self._post("/jobs/batch", {"jobs": [_api_spec(s) for s in specs]})
        return [j["id"] for j in body["jobs"]]

    def _family_via_client(self, children, then):
        return self.client.fan_out(children, then)

    def _family_via_api(self, children, then):
        body = self._post("/jobs/fan-out", {"children": [_api_spec(c) for c in children],
                                            "then": _api_spec(then)})
        return body["id"]

    # -- the loop ---------------------------------------------------------------------------
    def _until_acked(self, fn, *args):
        """Call until it answers (same keys every time, so a repeat is the same job)."""
        delay = 0.05
        while True:
            try:
                return fn(*args)
            except (*RETRYABLE, ApiUnavailable) as exc:
                self.retries += 1
                if time.monotonic() > self._give_up_at:
                    log.warning("chaos: submit given up: %s", exc)
                    return None
                time.sleep(delay)
                delay = min(1.0, delay * 2)

    def _record(self, ids, route):
        if ids is None:
            return
        with self.lock:
            for job_id in ids:
                self.acked[job_id] = route

    def _one_tick(self, per_tick: float):
        rng = self.mix.rng
        n = int(per_tick) + (1 if rng.random() < per_tick - int(per_tick) else 0)
        if n:
            specs = self.mix.batch(n)
            draw = rng.random()
            if draw < self.api_share:
                route, fn = "api", self._via_api
            elif draw < self.api_share + self.sql_share:
                route, fn = "sql_notify", self._via_sql
            else:
                route, fn = "client", self._via_client
            ids = self._until_acked(fn, specs)
            if ids is None:
                self.unacked += len(specs)
            self._record(ids, route)
        if rng.random() < self.families_per_tick:
            children, then = self.mix.family()
            api = rng.random() < 0.3
            coordinator = self._until_acked(self._family_via_api if api else self._family_via_client,
                                            children, then)
            if coordinator is None:
                self.unacked += 1 + len(children)
            else:
                with self.lock:
                    self.coordinators.append(coordinator)
                self._record([coordinator], "api" if api else "client")

    def _run(self, seconds: float):
        end = time.monotonic() + seconds
        per_tick = self.rate * self.tick
        next_at = time.monotonic()
        while not self._stop.is_set() and time.monotonic() < end:
            try:
                self._one_tick(per_tick)
            except Exception as exc:  # noqa: BLE001 - a refused batch must not end the workload
                self.errors.append(f"{type(exc).__name__}: {exc}"[:300])
            next_at += self.tick
            self._stop.wait(max(0.0, next_at - time.monotonic()))

    def start(self, seconds: float, give_up_after: float):
        self._give_up_at = time.monotonic() + seconds + give_up_after
        self._thread = threading.Thread(target=self._run, args=(seconds,), name="chaos-producer",
                                        daemon=True)
        self._thread.start()

    def join(self, timeout: float | None = None) -> bool:
        if self._thread is not None:
            self._thread.join(timeout)
            return not self._thread.is_alive()
        return True

    def stop(self):
        self._stop.set()

    def close(self):
        self.client.close()
        self.sql_db.close()
