"""Reconnect pacing shared by every long-running process (worker, relay, reaper)."""

from __future__ import annotations

import random


class Backoff:
    """Exponential backoff with a cap, reset on success: reconnect without a crash loop.
    Each delay is drawn between half and all of the step ("equal jitter"): after a
    PostgreSQL restart, a hundred workers must not all reconnect in the same instant."""

    def __init__(self, first: float = 0.1, cap: float = 5.0):
        self.first, self.cap, self.current = first, cap, first

    def next(self) -> float:
        step, self.current = self.current, min(self.cap, self.current * 2)
        return step * (0.5 + random.random() / 2)

    def reset(self) -> None:
        self.current = self.first
