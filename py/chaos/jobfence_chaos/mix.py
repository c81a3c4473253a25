"""What the run submits: a seeded mix of job specs (the dicts ``Client.submit_many`` takes).

Every spec carries an idempotency key unique to the run, so a producer that lost the answer
to a submit (a PostgreSQL restart, a connection killed) can send it again and get the same
job back instead of a twin.
"""

from __future__ import annotations

import random
from datetime import datetime, timedelta, timezone

ORDERING_KEYS = 6
# (kind, share of plain submits). Delayed jobs are chaos_quick with a run_after ahead.
SHARES = (("chaos_quick", 0.30), ("chaos_slow", 0.10), ("chaos_flaky", 0.15),
          ("chaos_effect", 0.15), ("chaos_ordered", 0.18), ("delayed", 0.12))
SLOW_SECONDS = (0.6, 0.9)      # past the first heartbeat (a third of a 1.5 s lease)
DELAY_SECONDS = (0.5, 4.0)


class Mix:
    def __init__(self, rng: random.Random, tag: str):
        self.rng = rng
        self.tag = tag
        self.n = 0
        self.kinds = [k for k, _ in SHARES]
        self.weights = [w for _, w in SHARES]

    def key(self) -> str:
        self.n += 1
        return f"{self.tag}-{self.n}"

    def spec(self) -> dict:
        kind = self.rng.choices(self.kinds, self.weights)[0]
        rng = self.rng
        spec: dict = {"idempotency_key": self.key()}
        if kind == "chaos_slow":
            spec.update(kind=kind, payload={"seconds": round(rng.uniform(*SLOW_SECONDS), 3)})
        elif kind == "chaos_flaky":
            spec.update(kind=kind, payload={"p": 0.3})
        elif kind == "chaos_effect":
            spec.update(kind=kind, payload={"seconds": round(rng.uniform(0, 0.3), 3)})
        elif kind == "chaos_ordered":
            key = f"{self.tag}-key-{rng.randrange(ORDERING_KEYS)}"
            spec.update(kind=kind, ordering_key=key,
                        payload={"key": key, "seconds": round(rng.uniform(0, 0.05), 3)})
        elif kind == "delayed":
            spec.update(kind="chaos_quick", payload={"delayed": True},
                        run_after=datetime.now(timezone.utc)
                        + timedelta(seconds=rng.uniform(*DELAY_SECONDS)))
        else:
            spec.update(kind=kind, payload={})
        return spec

    def batch(self, n: int) -> list[dict]:
        return [self.spec() for _ in range(n)]

    def family(self) -> tuple[list[dict], dict]:
        """Children and a coordinator for ``fan_out``; only the coordinator has a key (the
        SQL refuses child keys that exist, and a repeat with the coordinator's key creates
        nothing)."""
        children = [{"kind": "chaos_child", "payload": {"seconds": round(self.rng.uniform(0, 0.2), 3)}}
                    for _ in range(self.rng.randint(2, 5))]
        return children, {"kind": "chaos_fanin", "payload": {}, "idempotency_key": self.key()}
